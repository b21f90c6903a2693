package rdm

import (
	"math"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/sendbuf"
)

// GetBuffer leases a free registered send buffer, or returns nil when none
// is free or the endpoint is closed. Fill buf.Bytes() and pass it to
// SendBuffer, or give it back with ReleaseBuffer.
func (e *Endpoint) GetBuffer() *sendbuf.NetworkBuffer {
	if e.c.Ended() {
		return nil
	}
	id, ok := e.bufs.Set.Take(e.holder)
	if !ok {
		return nil
	}
	if e.c.Ended() { // raced the end: Close reclaims only what it sees
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
// removed peer; Failed when the provider refuses the post. It does not
// allocate.
func (e *Endpoint) SendBuffer(buf *sendbuf.NetworkBuffer, size int, to Peer) netio.Status {
	if buf == nil || !e.bufs.Pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	ep, ok := e.c.Guard.Acquire()
	if !ok {
		return netio.Closed
	}
	defer e.c.Guard.Release()
	dest, ok := e.peers.lookup(to)
	if !ok {
		return netio.InvalidArgument
	}
	id := uint32(buf.ID())
	if !e.bufs.Set.Leased(id) || e.bufs.Set.Holder(id) != e.holder {
		return netio.InvalidArgument
	}
	e.dests[id] = dest // before MarkPosted publishes the slot to the poller
	if !e.bufs.Set.MarkPosted(id, e.holder, buf.ID()) {
		return netio.InvalidArgument
	}
	e.c.Counters.Posted(size)
	if st := e.c.Send(ep, id, size, size); st != netio.OK {
		e.c.Counters.Unposted(size)
		e.bufs.Set.Unpost(id, e.holder)
		return st
	}
	return netio.OK
}

// postSend posts buffer key's first n bytes to its destination. It runs on
// the caller's goroutine, or on the poller goroutine for a queued send.
func (e *Endpoint) postSend(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
	buf := e.bufs.Pool.Lookup(uint64(key))
	return ep.SendTo(buf.Addr(), n, buf.Desc(), e.dests[key], e.c.Owner.Context(key))
}

// ReleaseBuffer gives back a leased buffer that was not sent and returns
// its key (the buffer ID). It reports InvalidArgument, changing nothing,
// for an unknown ID or a buffer not leased from this endpoint.
func (e *Endpoint) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	if id > math.MaxUint32 || !e.bufs.Set.Release(uint32(id), e.holder) {
		return id, netio.InvalidArgument
	}
	return id, netio.OK
}

// Inject sends data (at most InjectSize bytes) to peer at once: the
// provider copies it before Inject returns and reports no completion, so
// there is no key and no buffer. It returns OK, NoResources (retry),
// InvalidArgument for data larger than InjectSize or an unknown peer,
// Closed after Close, or Failed. It runs on the poller goroutine and waits
// for it (see poller.go), which costs a wake-up when the poller sleeps and
// an allocation.
func (e *Endpoint) Inject(data []byte, to Peer) netio.Status {
	if e.c.Ended() {
		return netio.Closed
	}
	dest, ok := e.peers.lookup(to)
	if !ok || len(data) > e.InjectSize() {
		return netio.InvalidArgument
	}
	var errno fabric.Errno
	err := e.onPoller(func() error { // one thread in the provider: poller.go
		errno = e.c.Guard.Endpoint().InjectTo(data, dest)
		return nil
	})
	if err != nil {
		return netio.Closed
	}
	if errno != 0 {
		return sendcore.PostStatus(errno)
	}
	e.c.Counters.Posted(len(data))
	e.c.Counters.Finished(netio.OK, 1)
	return netio.OK
}

// InjectSize returns the largest message Inject takes: the provider's
// inject_size.
func (e *Endpoint) InjectSize() int { return e.injectSize }

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
	Sent          uint64 // messages posted (or queued for the poller) and injected
	Bytes         uint64 // bytes of them
	Completed     uint64 // sends completed OK, injects included
	Failed        uint64 // sends that completed with an error or were canceled
	Received      uint64 // messages passed to OnData
	ReceivedBytes uint64 // bytes of them
	ReceiveErrors uint64 // receives that failed (OnReceiveError)
	Peers         int    // known peers now
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := e.c.Counters.Read()
	return Stats{Sent: s.Sent, Bytes: s.Bytes, Completed: s.Completed, Failed: s.Failed + s.Canceled,
		Received: e.received.Load(), ReceivedBytes: e.receivedBytes.Load(), ReceiveErrors: e.receiveErrors.Load(),
		Peers: e.peers.count()}
}
