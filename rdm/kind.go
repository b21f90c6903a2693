package rdm

import (
	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/stats"
)

// Key marks. One endpoint posts receives, buffered sends, zero-copy sends
// and injects through one completion queue and one hand-off queue; the
// mark in the upper bits of a key says which table the rest indexes. A
// key without a mark is a send buffer's ID (below netio.MaxBufferCount).
const (
	recvKey    = 1 << 31 // a receive buffer
	zcMark     = 1 << 30 // a header slot of a zero-copy send
	injectKey  = 1 << 29 // a slot of the inject queue
	confirmKey = 1 << 28 // a confirm slot: a tracked inject (see confirms)
	markBits   = recvKey | zcMark | injectKey | confirmKey
)

// errRemoved is the reason a queued send to a peer removed before the
// poller could post it fails: its address may name another peer by now.
const errRemoved = fabric.EHOSTUNREACH

// kind is the send core's view of an Endpoint: its table of sends in flight
// is the send buffers' slot set, the zero-copy header slots and the inject
// queue together, told apart by the marks above.
type kind Endpoint

// Claim takes a send back from the provider once and returns its key.
func (k *kind) Claim(id uint32) (uint64, bool) {
	switch {
	case id&zcMark != 0:
		return k.zc.Claim(id &^ zcMark)
	case id&injectKey != 0:
		return k.inj.claim(id &^ injectKey)
	case id&confirmKey != 0:
		return k.inj.ok.claimConfirm(id &^ confirmKey)
	default:
		return k.bufs.Set.Complete(id, k.holder)
	}
}

// Pending lists the sends in flight of every table, marked.
func (k *kind) Pending(dst []uint32) []uint32 {
	dst = k.bufs.Set.Posted(dst, k.holder)
	dst = k.zc.Pending(dst, zcMark)
	dst = k.inj.pending(dst)
	return k.inj.ok.pendingConfirms(dst)
}

// ReportTo sends each table's keys to its own callback: zero-copy keys are
// the caller's, buffered keys buffer IDs, and injects have none.
func (k *kind) ReportTo(id uint32) func(uint64, netio.Status) {
	switch {
	case id&zcMark != 0:
		return k.cfg.ZeroCopy.onSendCompleted()
	case id&(injectKey|confirmKey) != 0:
		return nil
	default:
		return k.cfg.OnSendCompleted
	}
}

func (k *kind) HandleCompletion(key uint32, r poll.Result) { k.c.Complete(k, key, r) }
func (k *kind) CancelPending(error)                        { (*Endpoint)(k).cancelPending() }
func (k *kind) Progress() (bool, uint64)                   { return k.c.Counters.Progress() }
func (k *kind) ReleaseResources() error                    { return (*Endpoint)(k).releaseResources() }

// FillStats adds the send buffers, what every peer's coalescer posted and
// dropped, what was received and decoded, the peers, and the confirm
// slots held (the core fills InjectsUnconfirmed, to which rdm adds its
// own: confirms.unconfirmed).
func (k *kind) FillStats(s *stats.Endpoint) {
	s.CoalescedMessages, s.CoalescedBuffers, s.CoalesceDropped = k.cos.counts.Read()
	s.Buffers = k.bufs.Set.Len()
	s.FreeBuffers, s.MinFreeBuffers = k.bufs.Set.ReadFree()
	s.MessagesReceived, s.BytesReceived, s.ReceiveErrors = k.received.Load(), k.receivedBytes.Load(), k.receiveErrors.Load()
	s.DecodedMessages = k.decoded.Load()
	s.Peers = k.peers.count()
	s.InjectConfirmsHeld = int(k.inj.ok.held.Load())
}

// cancelPending ends coalescing first (a callback below finds it closed),
// forgets the parked sends, then reports every send in flight.
func (e *Endpoint) cancelPending() {
	e.endAllCoalescers()
	e.park.reset()
	e.c.CancelAll((*kind)(e))
}

// peerOfKey returns the peer a send was given for.
func (e *Endpoint) peerOfKey(key uint32) Peer {
	switch {
	case key&zcMark != 0:
		return peerOf(e.zc.Dest(key &^ zcMark))
	case key&injectKey != 0:
		return e.inj.to[key&^injectKey]
	case key&confirmKey != 0:
		return e.inj.ok.to[key&^confirmKey]
	}
	return e.dests[key]
}

// postTo posts the send with this key, n bytes or iovecs, to peer to. It
// runs on the poller goroutine (every rdm send is handed to it, see
// poller.go), as does RemovePeer: a peer removed since the send was queued
// is never looked up as another peer that took its address.
func (e *Endpoint) postTo(ep *fabric.Endpoint, key uint32, n int, to Peer) fabric.Errno {
	dest, ok := e.peers.lookup(to)
	if !ok {
		return errRemoved
	}
	var errno fabric.Errno
	switch {
	case key&zcMark != 0:
		errno = e.zc.PostTo(ep, key&^zcMark, n, dest, e.c.Owner.Context(key))
	case key&injectKey != 0:
		return e.postInject(ep, key&^injectKey, n, to, dest)
	default:
		buf := e.bufs.Pool.Lookup(uint64(key))
		errno = ep.SendTo(buf.Addr(), n, buf.Desc(), dest, e.c.Owner.Context(key))
	}
	if errno == 0 && e.inj.ok.any { // after the post, off the path to it: see confirms.posted
		e.inj.ok.posted(uint32(e.sendIndex(key)), to.slot)
	}
	return errno
}
