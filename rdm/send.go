package rdm

import (
	"math"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/sendbuf"
)

// GetBuffer leases a free registered send buffer, or returns nil when none
// is free or the endpoint is closed. Fill buf.Bytes() and pass it to
// SendBuffer, or give it back with ReleaseBuffer.
func (e *Endpoint) GetBuffer() *sendbuf.NetworkBuffer {
	if e.cfg.Coalesce != nil || e.c.Ended() {
		return nil
	}
	return e.take()
}

// take leases a free buffer to the endpoint, or returns nil. One that raced
// the end goes back: Close reclaims only what it sees.
func (e *Endpoint) take() *sendbuf.NetworkBuffer {
	id, ok := e.bufs.Set.Take(e.holder)
	if !ok {
		return nil
	}
	if e.c.Ended() {
		e.bufs.Set.Release(id, e.holder)
		return nil
	}
	return e.bufs.Pool.Lookup(uint64(id))
}

// SendBuffer sends the first size bytes of buf to peer as one message and
// hands buf to the endpoint until its completion, which reports the
// buffer's ID. It returns OK when posted (or queued for the poller, see
// endpoint.HandOffSize); NoResources when the provider cannot take it now
// (a full queue, or ofi_rxm still connecting to the peer: retry); Closed
// after Close; InvalidArgument, changing nothing, for a buffer not leased
// from this endpoint, a size outside 0..buf.Size(), or an unknown or
// removed peer, or a coalescing endpoint (it owns its buffers); Failed
// when the provider refuses the post. It does not allocate.
func (e *Endpoint) SendBuffer(buf *sendbuf.NetworkBuffer, size int, to Peer) netio.Status {
	if e.cfg.Coalesce != nil || buf == nil || !e.bufs.Pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	return e.post(buf, size, to)
}

// post sends buf's first size bytes to to, through the poller.
func (e *Endpoint) post(buf *sendbuf.NetworkBuffer, size int, to Peer) netio.Status {
	ep, st := e.acquireFor(to)
	if st != netio.OK {
		return st
	}
	defer e.c.Guard.Release()
	id := uint32(buf.ID())
	if !e.bufs.Set.Leased(id) || e.bufs.Set.Holder(id) != e.holder {
		return netio.InvalidArgument
	}
	e.dests[id] = to // before MarkPosted publishes the slot to the poller
	if !e.bufs.Set.MarkPosted(id, e.holder, buf.ID()) {
		return netio.InvalidArgument
	}
	if st := e.c.Send(ep, id, size, size); st != netio.OK { // counts the send
		e.bufs.Set.Unpost(id, e.holder)
		return st
	}
	return netio.OK
}

// acquireFor takes the post guard for a send to peer to and returns the
// endpoint: Closed after Close, InvalidArgument (the guard not held) for
// an unknown or removed peer. On OK the caller releases the guard.
func (e *Endpoint) acquireFor(to Peer) (*fabric.Endpoint, netio.Status) {
	ep, ok := e.c.Guard.Acquire()
	if !ok {
		return nil, netio.Closed
	}
	if _, ok := e.peers.lookup(to); !ok {
		e.c.Guard.Release()
		return nil, netio.InvalidArgument
	}
	return ep, netio.OK
}

// ReleaseBuffer gives back a leased buffer that was not sent and returns
// its key (the buffer ID). It reports InvalidArgument, changing nothing,
// for an unknown ID, a buffer not leased from this endpoint, or on a
// coalescing endpoint.
func (e *Endpoint) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	if e.cfg.Coalesce != nil || id > math.MaxUint32 || !e.bufs.Set.Release(uint32(id), e.holder) {
		return id, netio.InvalidArgument
	}
	return id, netio.OK
}

// NumAvailableBuffers returns the fewest free send buffers seen since the
// previous call (netio3's get_num_available_buffers).
func (e *Endpoint) NumAvailableBuffers() int { return e.bufs.Pool.NumAvailable() }

// PendingSends returns the keys of the sends in flight. It allocates; use
// it for diagnostics.
func (e *Endpoint) PendingSends() []uint64 {
	var keys []uint64
	for _, id := range e.bufs.Set.Posted(nil, e.holder) {
		keys = append(keys, uint64(id))
	}
	return keys
}

// BufferSize returns the size of each send buffer: the largest message.
func (e *Endpoint) BufferSize() int { return e.bufs.Pool.BufferSize() }

// Stats counts what an endpoint did.
type Stats struct {
	Sent      uint64 // messages posted (or queued for the poller) and injected
	Bytes     uint64 // bytes of them
	Completed uint64 // sends completed OK, injects included
	Failed    uint64 // sends that completed with an error or were canceled
	// InjectsUnconfirmed counts injects the provider took (so counted in
	// Completed) that no later send's completion to the same peer had
	// confirmed sent when the endpoint closed or the peer was removed:
	// the provider may have discarded them (see Inject).
	InjectsUnconfirmed uint64
	// InjectConfirmsHeld is the tracked injects in flight now, each in a
	// confirm slot of its own until it completes or the endpoint closes,
	// also after its peer was removed: a provider that does not complete a
	// send to a removed dead peer (udp;ofi_rxd, for minutes if ever) keeps
	// that slot, and once
	// all min(MaxPeers+2, InjectQueue) are held no inject is tracked (see
	// Inject).
	InjectConfirmsHeld int
	Received           uint64 // libfabric messages received: passed to OnData, or coalesced buffers decoded for OnMessage
	ReceivedBytes      uint64 // bytes of them
	ReceiveErrors      uint64 // receives that failed, buffers that could not be posted again, and malformed coalesced buffers (OnReceiveError)
	Decoded            uint64 // messages decoded from coalesced buffers for OnMessage
	Peers              int    // known peers now
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := e.c.Counters.Read()
	return Stats{Sent: s.Sent, Bytes: s.Bytes, Completed: s.Completed, Failed: s.Failed + s.Canceled, InjectsUnconfirmed: e.c.InjectsUnconfirmed(),
		InjectConfirmsHeld: int(e.inj.ok.held.Load()),
		Received:           e.received.Load(), ReceivedBytes: e.receivedBytes.Load(), ReceiveErrors: e.receiveErrors.Load(), Decoded: e.decoded.Load(),
		Peers: e.peers.count()}
}
