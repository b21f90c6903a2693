package rdm

import (
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/slots"
)

// DefaultInjectQueue is the number of injects that may wait for the
// poller when Config.InjectQueue is 0.
const DefaultInjectQueue = 64

// injects is the inject queue: slots of inject_size bytes in Go memory
// that Inject fills and the poller goroutine posts through the send
// core's hand-off, in order with the other sends. A slot is free again as
// soon as the poller has given its inject to the provider (fi_inject
// copies it; a tracked one is copied into the peer's confirm slot, in
// registered memory, see confirms), refused it, or the endpoint closed:
// no queue slot waits for a completion, so a stalled peer holds none, and
// nothing in the queue is registered or pinned. A slot's state lives in
// an internal/slots.Set: taken straight into posted by Inject, back to
// free when claimed.
type injects struct {
	set  *slots.Set
	mem  []byte
	size int    // bytes per slot: the provider's inject_size
	to   []Peer // by slot

	// For WaitInject: injects queued (taken and not yet freed), the most
	// it waits for, and its estimate of the poller's time per inject.
	queued atomic.Int32
	low    int32
	perMsg atomic.Int64 // nanoseconds

	// perPeer counts, by peer slot, the injects queued and not yet given
	// to the provider: the last of a peer's is tracked (see tracks).
	perPeer []atomic.Int32
	ok      confirms // which taken injects a later completion confirmed
}

func (q *injects) init(n, size, peers int) {
	q.set, q.mem, q.size, q.to = slots.NewSet(n), make([]byte, n*size), size, make([]Peer, n)
	q.low = int32(n / 2)
	q.perPeer = make([]atomic.Int32, peers+2)
}

func (q *injects) len() int {
	if q.set == nil {
		return 0
	}
	return q.set.Len()
}

// piece returns slot idx's first n bytes.
func (q *injects) piece(idx uint32, n int) []byte {
	off := int(idx) * q.size
	return q.mem[off : off+n : off+n]
}

// claim frees slot idx once: its inject was given to the provider,
// refused, or canceled. It may run on Inject's caller goroutine (Inject's
// failure path): the peer is read before the slot is free for another
// Inject to fill, and the counts are atomic.
func (q *injects) claim(idx uint32) (uint64, bool) {
	if q.set == nil {
		return 0, false
	}
	slot := q.to[idx].slot
	_, ok := q.set.Complete(idx, slots.SoleHolder)
	if ok {
		if int(slot) < len(q.perPeer) {
			q.perPeer[slot].Add(-1)
		}
		q.queued.Add(-1)
	}
	return 0, ok // an inject has no key: ReportTo reports it to nobody
}

// pending appends the queued injects to dst, marked.
func (q *injects) pending(dst []uint32) []uint32 {
	if q.set == nil {
		return dst
	}
	return q.set.PostedMarked(dst, slots.SoleHolder, injectKey)
}

// Inject sends data (at most InjectSize bytes) to peer without a buffer
// and without a key: it copies data into the inject queue and the poller
// goroutine hands it to the provider (fi_inject), in order with the sends
// before it, and nothing is reported per message. data may be reused at
// once. It returns OK when queued; NoResources when Config.InjectQueue
// injects are waiting already (retry after a moment); InvalidArgument,
// changing nothing, for data larger than InjectSize or an unknown or
// removed peer; Closed after Close. It never blocks and does not allocate.
//
// An inject the provider refuses later, or that was still queued when its
// peer was removed or the endpoint closed, is logged and counted in
// Stats.Failed; one the provider took counts in Stats.Completed. Taken is
// not sent: tcp;ofi_rxm, sockets and udp;ofi_rxd hold injects in their own
// queues while the peer is slow, and fi_close discards them. The completion
// of a later send to the same peer confirms an inject: a buffered send's, a
// zero-copy send's, or a tracked inject's. The last inject queued to a
// peer, and every 33rd in a row to it, is tracked: copied into the peer's
// confirm slot (registered memory) and posted with fi_send and a
// completion, one in flight per peer; it counts in Completed or Failed only
// when it completes, and until then as a pending send
// (Config.ProgressTimeout applies to it as to a buffered send). With every
// confirm slot in flight, or the fi_send refused for now, it goes untracked
// (fi_inject) instead. While a peer's tracked inject is in flight, its
// later injects go untracked, but the last one queued waits for that
// completion parked in the peer's lane, holding its queue slot, for half
// Config.PeerTimeout at most, and no longer once any send to the peer is
// queued behind it; then it goes untracked. So each slow peer holds a
// queue slot meanwhile, and with InjectQueue slow peers Inject says
// NoResources to every peer for up to half PeerTimeout. At a quiet rate
// nearly every inject is an fi_send with a completion, costing a
// completion read on the poller. Close waits up to Config.InjectLinger
// until nothing is queued and either every taken inject is confirmed and
// no tracked one is in flight, or no send is pending (nothing can confirm
// the rest); those nothing confirmed when the endpoint closes or the peer
// is removed are logged and counted in Stats.InjectsUnconfirmed, as lost or
// not (shm, whose fi_inject places the message in the peer's memory,
// delivered them all the same). Close called from a callback of this
// endpoint does not wait: call it once the completion of a buffered
// message sent to each peer last has come (OnSendCompleted), which
// confirms the injects before it. A confirm slot is held until its send
// completes or the endpoint closes, also after RemovePeer
// (Stats.InjectConfirmsHeld): udp;ofi_rxd may never complete a send to a
// removed dead peer, and once every slot is held no inject is tracked. Why
// it is queued: every provider call of an rdm domain runs on its poller
// goroutine (see poller.go).
//
// Called from a callback (on the poller goroutine) with nothing queued
// before it, the inject is handed to the provider at once, where
// poll.FastGoroutineID: one the provider refuses for good, or refuses to
// a peer whose sends timed out (Config.PeerTimeout), then returns Failed
// at once, is not counted in Stats, and data is not sent; one it refuses
// for now waits in the peer's lane as a queued one would.
func (e *Endpoint) Inject(data []byte, to Peer) netio.Status {
	if len(data) > e.injectSize {
		return netio.InvalidArgument
	}
	ep, st := e.acquireFor(to)
	if st != netio.OK {
		return st
	}
	defer e.c.Guard.Release()
	idx, ok := e.inj.set.TakePosted(slots.SoleHolder, 0)
	if !ok {
		return netio.NoResources
	}
	e.inj.queued.Add(1)
	copy(e.inj.piece(idx, len(data)), data)
	e.inj.to[idx] = to
	if int(to.slot) < len(e.inj.perPeer) {
		e.inj.perPeer[to.slot].Add(1)
	}
	if st := e.c.Send(ep, idx|injectKey, len(data), len(data)); st != netio.OK { // counts the send
		e.inj.claim(idx)
		return st
	}
	return netio.OK
}

// postInject injects slot idx's n bytes to dest. It runs on the poller
// goroutine (postSend). An untracked inject, once taken, is freed and
// counted at once: fi_inject has copied it and reports no completion. A
// tracked one (tracks says which) is copied into its peer's confirm slot
// and posted from there with fi_send; its queue slot is free at once, and
// its completion counts it and confirms it and the injects to its peer
// before it (see confirms); refused for now, it goes untracked. The last
// inject queued to a peer whose tracked inject is still in flight waits
// for its completion, parked in the peer's lane, to go tracked then (see
// waitsForConfirm). Not fi_sendmsg with FI_INJECT|FI_COMPLETION:
// in libfabric 1.17 ofi_rxd's inject path drops the context, and ofi_rxm
// over tcp sends from the caller's memory after the call all the same
// (rxm_direct_send ignores FI_INJECT).
func (e *Endpoint) postInject(ep *fabric.Endpoint, idx uint32, n int, to Peer, dest fabric.Addr) fabric.Errno {
	if e.inj.tracks(to.slot) {
		if errno, sent := e.sendTracked(ep, idx, n, to, dest); sent || errno != 0 {
			return errno
		}
	} else if e.waitsForConfirm(to.slot) {
		return fabric.EAGAIN // parked until the confirm completes (retryParked)
	}
	errno := ep.InjectTo(e.inj.piece(idx, n), dest)
	if errno == 0 {
		e.injected(to.slot, idx)
	}
	return errno
}

// injected accounts the untracked inject in queue slot idx, to the peer
// in slot, that the provider took: counted for the peer's confirmation,
// and its key reported OK (postInject, PostRun).
func (e *Endpoint) injected(slot, idx uint32) {
	e.inj.ok.took(slot)
	e.c.Complete((*kind)(e), idx|injectKey, poll.Result{Status: netio.OK})
}

// InjectSize returns the largest message Inject takes: the provider's
// inject_size.
func (e *Endpoint) InjectSize() int { return e.injectSize }
