package rdm

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/slots"
)

// DefaultInjectQueue is the number of injects that may wait for the
// poller when Config.InjectQueue is 0.
const DefaultInjectQueue = 64

// injects is the inject queue: slots of inject_size bytes in Go memory
// (fi_inject copies the payload before it returns, so nothing is
// registered or pinned past the call) that Inject fills and the poller
// goroutine posts through the send core's hand-off, in order with the
// other sends. A slot's state lives in an internal/slots.Set: taken
// straight into posted by Inject, back to free when the poller has
// injected it, refused it, or the endpoint closed.
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

	ok   confirms       // which taken injects a later completion confirmed
	pin  runtime.Pinner // mem: a provider reads a tracked inject's slot until it completes
	held int32          // tracked injects posted and not completed (poller goroutine only)
}

func (q *injects) init(n, size int) {
	q.set, q.mem, q.size, q.to = slots.NewSet(n), make([]byte, n*size), size, make([]Peer, n)
	q.low = int32(n / 2)
	if len(q.mem) > 0 {
		q.pin.Pin(&q.mem[0])
	}
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

// addr returns slot idx's address, for a send the provider may read until
// it completes: mem is pinned while the endpoint is open.
func (q *injects) addr(idx uint32) uintptr {
	return uintptr(unsafe.Pointer(&q.mem[int(idx)*q.size]))
}

// claim frees slot idx once, for its completion or its cancel.
func (q *injects) claim(idx uint32) (uint64, bool) {
	if q.set == nil {
		return 0, false
	}
	_, ok := q.set.Complete(idx, slots.SoleHolder)
	if ok {
		if q.ok.untrack(idx) {
			q.held-- // poller goroutine: only a posted, tracked slot was tracked
		}
		q.freed()
	}
	return 0, ok // an inject has no key: ReportTo reports it to nobody
}

// freed counts a slot given back (poller goroutine): one atomic add.
func (q *injects) freed() { q.queued.Add(-1) }

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
// of a later send to the same peer confirms an inject: a buffered send's, or
// that of an inject posted with a completion (the last queued one, and every
// 32nd in a row to a peer, which counts in Completed or Failed only when it
// completes). Close waits up to Config.InjectLinger for every taken inject
// to be confirmed; those nothing confirmed when the endpoint closes or the
// peer is removed are logged and counted in Stats.InjectsUnconfirmed, as
// lost or not (shm, whose fi_inject places the message in the peer's
// memory, delivered them all the same). Close called from a callback does
// not wait: call it once the completion of a buffered message sent to
// each peer last has come (OnSendCompleted), which confirms the injects
// before it. Why it is queued: every provider call of an rdm domain runs
// on its poller goroutine (see poller.go).
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
	e.c.Counters.Posted(len(data))
	if st := e.c.Send(ep, idx|injectKey, len(data), len(data)); st != netio.OK {
		e.c.Counters.Unposted(len(data))
		e.inj.claim(idx)
		return st
	}
	return netio.OK
}

// postInject injects slot idx's n bytes to dest. It runs on the poller
// goroutine (postSend). An untracked inject, once taken, is freed and
// counted at once: fi_inject has copied it and reports no completion. A
// tracked one (tracks says which) is posted with fi_send from its slot,
// which stays posted until the completion frees and counts it and
// confirms it and the injects to its peer before it. Not fi_sendmsg with
// FI_INJECT|FI_COMPLETION: in libfabric 1.17 ofi_rxd's inject path drops
// the context, and ofi_rxm over tcp sends from the caller's memory after
// the call all the same (rxm_direct_send ignores FI_INJECT).
func (e *Endpoint) postInject(ep *fabric.Endpoint, idx uint32, n int, dest fabric.Addr) fabric.Errno {
	slot := e.inj.to[idx].slot
	if e.inj.tracks(slot) {
		errno := ep.SendTo(e.inj.addr(idx), n, 0, dest, e.c.Owner.Context(idx|injectKey))
		if errno == 0 {
			e.inj.ok.took(slot, idx)
			e.inj.held++
		}
		return errno
	}
	errno := ep.InjectTo(e.inj.piece(idx, n), dest)
	if errno == 0 {
		e.inj.ok.took(slot, noSlot)
		e.c.Complete((*kind)(e), idx|injectKey, poll.Result{Status: netio.OK})
	}
	return errno
}

// InjectSize returns the largest message Inject takes: the provider's
// inject_size.
func (e *Endpoint) InjectSize() int { return e.injectSize }
