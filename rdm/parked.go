package rdm

import (
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/backoff"
	"github.com/netio-go/netio/internal/poll"
)

// DefaultPeerTimeout is how long sends to one peer may wait for the
// provider to take them when Config.PeerTimeout is 0.
const DefaultPeerTimeout = 5 * time.Second

// parkRetry is how long a lane's parked sends first wait for a scheduled
// retry (the timer's, or a completion's once it is due) when no completion
// retries them first. Once the provider has refused the lane's head
// without a break for parkRetryMax, the lane is backed off: each scheduled
// retry of it that the provider refuses doubles the wait, up to
// parkRetryMax; a send of the lane that the provider takes brings it back
// to parkRetry (backoff.Doubling.RefusedFor).
const parkRetry = time.Millisecond

// parkRetryMax caps the wait between a lane's scheduled retries. Why
// back off: ofi_rxm refuses every send to a peer whose process died, and
// tries to connect again on each post, so a retry every parkRetry was a
// connection attempt a millisecond per dead peer until PeerTimeout
// (and with a stream to another peer, whose every completion retried
// every lane, one per completion; figures: docs/performance.md,
// hack/retrycost). Why this cap:
// it bounds how late a backed-off lane notices that its peer takes sends
// again, unless a send to that peer completes first; 64 ms is short
// against a process restart or PeerTimeout's default, and leaves a dead
// peer 16 attempts a second. It is ReconnectingSender's cap for its
// refused backlog, for the same reason. It is also how long a lane is
// refused before it backs off at all: refusals that end without a
// completion to this sender (shm's peer queue full, where small sends
// complete at post; the endpoint's transmit pool; ofi_rxm still
// connecting) keep main's prompt retries, and a dead peer costs only the
// retries of its first 64 ms more.
const parkRetryMax = 64 * time.Millisecond

// Why parking: the poller posts every send from one FIFO (the send core's
// hand-off), and a post the provider refuses for now (EAGAIN) would stall
// that FIFO, and so the sends to every other peer, behind it. ofi_rxm
// refuses every send to a peer whose process died, for ever: it connects
// again on each one. So a refused send is parked in a lane of its peer
// instead, and later sends to that peer queue behind it in the lane (the
// order to one peer stays the order of the calls), while sends to the
// other peers go on. Parked sends are retried after each completion (a
// backed-off lane, refused without a break for parkRetryMax: after the
// completions of sends to its own peer, or once its retry is due), and by
// a timer, each lane after a wait of parkRetry that, once the lane backed
// off, doubles with each refusal up to parkRetryMax, but never runs
// past its deadline; a lane that took nothing for Config.PeerTimeout fails
// with ETIMEDOUT, each key reported once, and until the provider takes a
// send to that peer again, a send to it that the provider refuses fails at
// once; RemovePeer fails its lane at once with EHOSTUNREACH. All of it
// runs on the poller goroutine.

// lane is a peer's parked sends: a list through parking.next.
type lane struct {
	head, tail int32     // send indexes; head -1 when empty
	since      time.Time // when the head began waiting
	// wait is the wait before the lane's next scheduled retry (the timer's,
	// or a completion's once due), and due when that retry is (retryAt).
	wait backoff.Doubling
	due  time.Time
	// unreachable: the lane timed out and the provider has taken no send
	// to the peer since; a refused send to it then fails at once instead
	// of waiting PeerTimeout again.
	unreachable bool
}

// parking holds the parked sends of an endpoint, by send index (sendIndex).
type parking struct {
	lanes   []lane        // by peer slot
	next    []int32       // by send index: the next send of its lane, -1 at the end
	n       []int         // by send index: its length (bytes or iovecs)
	count   int           // parked sends
	timeout time.Duration // Config.PeerTimeout
	timer   *time.Timer
	armed   time.Time // when timer fires; zero when it is not armed
	retryFn func()    // retryTimer, bound once so that retrying does not allocate
	// post posts one send to a peer: Endpoint.postTo, bound once; a test
	// puts a fault between the lanes and the provider with it.
	post func(ep *fabric.Endpoint, key uint32, n int, to Peer) fabric.Errno
}

func (pk *parking) init(peers, sends int, timeout time.Duration, retry func(), post func(*fabric.Endpoint, uint32, int, Peer) fabric.Errno, poller *poll.Poller) {
	pk.lanes = make([]lane, peers+1)
	for i := range pk.lanes {
		pk.lanes[i].head = -1
		pk.lanes[i].wait = backoff.New(parkRetry, parkRetryMax)
	}
	pk.next, pk.n = make([]int32, sends), make([]int, sends)
	pk.timeout, pk.retryFn, pk.post = timeout, retry, post
	pk.timer = time.AfterFunc(time.Hour, func() { poller.Go(pk.retryFn) })
	pk.timer.Stop()
}

// busy reports whether sends to the peer in slot wait in its lane.
func (pk *parking) busy(slot uint32) bool {
	return int(slot) < len(pk.lanes) && pk.lanes[slot].head >= 0
}

// push parks send idx of length n at the end of slot's lane.
func (pk *parking) push(slot uint32, idx int32, n int, now time.Time) {
	l := &pk.lanes[slot]
	pk.next[idx], pk.n[idx] = -1, n
	pk.count++
	if l.head >= 0 {
		pk.next[l.tail] = idx
		l.tail = idx
		return
	}
	l.head, l.tail, l.since = idx, idx, now
	l.wait.Reset() // a new lane: whatever its peer refused before, it is retried soon
	l.due = retryAt(now, now, l.wait.Wait(), pk.timeout)
	pk.armAt(now, l.due)
}

// retryAt is when a lane's next scheduled retry is: wait after now, but
// not later than the deadline of its head, waiting since since (since +
// timeout), at which the lane fails, nor than half of it while that is
// ahead: an inject waiting for its peer's confirmation stops waiting then
// (waitsForConfirm).
func retryAt(now, since time.Time, wait, timeout time.Duration) time.Time {
	at, mark := now.Add(wait), since.Add(timeout/2)
	if !now.Before(mark) {
		mark = since.Add(timeout)
	}
	if mark.Before(at) {
		return mark
	}
	return at
}

// armAt has the timer fire at at, unless it fires earlier already: a
// retry is never pushed out, so sends that keep coming cannot postpone it.
func (pk *parking) armAt(now, at time.Time) {
	if !pk.armed.IsZero() && !pk.armed.After(at) {
		return
	}
	pk.armed = at
	pk.timer.Reset(at.Sub(now))
}

// pop takes the head of slot's lane off.
func (pk *parking) pop(slot uint32, now time.Time) {
	l := &pk.lanes[slot]
	l.head, l.since = pk.next[l.head], now
	pk.count--
}

// detach takes the whole of slot's lane off and returns its first send
// (the rest follow through next, to -1); the lane is then empty, and a
// send pushed onto it starts a new one.
func (pk *parking) detach(slot uint32, now time.Time) int32 {
	l := &pk.lanes[slot]
	first := l.head
	l.head, l.since = -1, now
	for idx := first; idx >= 0; idx = pk.next[idx] {
		pk.count--
	}
	return first
}

// reset forgets every parked send: the endpoint closed, and CancelAll
// reports them with the rest.
func (pk *parking) reset() {
	if pk.timer == nil {
		return
	}
	pk.timer.Stop()
	pk.armed = time.Time{}
	for i := range pk.lanes {
		pk.lanes[i].head = -1
	}
	pk.count = 0
}

// sendIndex maps a send's key to its index among all the endpoint's
// sends: buffers, then header slots, then inject slots.
func (e *Endpoint) sendIndex(key uint32) int32 {
	switch {
	case key&zcMark != 0:
		return int32(e.bufs.Pool.Len()) + int32(key&^zcMark)
	case key&injectKey != 0:
		return int32(e.bufs.Pool.Len()+e.zc.Len()) + int32(key&^injectKey)
	}
	return int32(key)
}

// keyOf is the inverse of sendIndex.
func (e *Endpoint) keyOf(idx int32) uint32 {
	nb, nz := int32(e.bufs.Pool.Len()), int32(e.zc.Len())
	switch {
	case idx >= nb+nz:
		return uint32(idx-nb-nz) | injectKey
	case idx >= nb:
		return uint32(idx-nb) | zcMark
	}
	return uint32(idx)
}

// postSend is the send core's post of a queued send: at once, or parked
// behind the sends to the same peer that the provider refused for now.
func (e *Endpoint) postSend(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
	to := e.peerOfKey(key)
	if e.park.busy(to.slot) {
		e.park.push(to.slot, e.sendIndex(key), n, time.Now())
		return 0
	}
	errno := e.park.post(ep, key, n, to)
	l := &e.park.lanes[to.slot]
	switch {
	case errno.Temporary() && l.unreachable:
		return fabric.ETIMEDOUT
	case errno.Temporary():
		e.park.push(to.slot, e.sendIndex(key), n, time.Now())
		return 0
	case errno == 0:
		l.unreachable = false
	}
	return errno
}

// noLane is no lane's slot: a completion whose peer is not looked up.
const noLane = ^uint32(0)

// retryParked posts what the lanes hold after the completion of a send to
// the peer in slot from: a completion may have made room for a parked
// send. It retries from's lane, every lane not backed off (refused for
// less than parkRetryMax), and the lanes that are due: a lane the provider
// keeps refusing (ofi_rxm's lane to a dead peer, which connects again on
// every post) would otherwise be posted once per completion of the
// traffic to the other peers (docs/performance.md). It runs on the poller goroutine.
func (e *Endpoint) retryParked(from uint32) { e.retryLanes(false, from) }

// retryTimer is the timer's retry: it posts what the lanes that are due
// hold, and arms the timer for the next one. It runs on the poller
// goroutine.
func (e *Endpoint) retryTimer() {
	e.park.armed = time.Time{}
	e.retryLanes(true, noLane)
}

// retryLanes posts what the lanes hold, in order per lane, and fails a
// lane that took nothing for PeerTimeout: for the timer the lanes that are
// due, for a completion to the peer in slot from the lanes retryParked
// says. It runs on the poller goroutine. The post guard
// is held around each post only, never while a send is reported: the
// callback may Close the endpoint, whose teardown takes the guard
// exclusively on this very goroutine.
func (e *Endpoint) retryLanes(timer bool, from uint32) {
	if e.park.count == 0 {
		return
	}
	now := time.Now()
	var first time.Time // when the earliest lane left parked is due
	for slot := range e.park.lanes {
		l := &e.park.lanes[slot]
		due := !now.Before(l.due)
		if due || !timer && (uint32(slot) == from || !l.wait.BackedOff(now.Sub(l.since))) {
			if !e.retryLane(uint32(slot), now, due) {
				return // closing: CancelAll reports them
			}
		}
		if l.head >= 0 && (first.IsZero() || l.due.Before(first)) {
			first = l.due
		}
	}
	// A callback may have emptied a lane seen before (the timer then finds
	// nothing due), or parked a send in one (push armed the timer for it).
	if !first.IsZero() && e.park.count > 0 { // count 0: a callback closed the endpoint
		e.park.armAt(now, first)
	}
}

// retryLane posts slot's lane until the provider refuses again. It reports
// false once the endpoint is closed. due says the lane's scheduled retry
// has come, whoever runs it (the timer, or a completion first): its
// refusal schedules the next, after a wait doubled once the lane backed
// off, unless the provider took a send of the lane first, which brings
// the wait back to parkRetry; a refusal before the lane is due leaves its
// schedule as it was.
func (e *Endpoint) retryLane(slot uint32, now time.Time, due bool) bool {
	l := &e.park.lanes[slot]
	moved := false // a send left the lane: its head waits since now
	for l.head >= 0 {
		idx := l.head
		key := e.keyOf(idx)
		ep, open := e.c.Guard.Acquire()
		if !open {
			return false
		}
		errno := e.park.post(ep, key, e.park.n[idx], e.peerOfKey(key))
		e.c.Guard.Release()
		if errno.Temporary() {
			e.refused(slot, now, due, moved)
			return true
		}
		l.unreachable = false
		e.park.pop(slot, now)
		moved = true
		if errno == 0 {
			l.wait.Reset()
		} else {
			e.c.Complete((*kind)(e), key, poll.Result{Status: netio.Failed, Errno: errno})
		}
	}
	return true
}

// refused handles the provider's refusal of slot's head: the lane fails if
// it took nothing for PeerTimeout, and otherwise its next scheduled retry
// is set (see retryLane).
func (e *Endpoint) refused(slot uint32, now time.Time, due, moved bool) {
	l := &e.park.lanes[slot]
	if now.Sub(l.since) >= e.cfg.PeerTimeout {
		e.c.Log.Warn().Str("peer", e.peers.nameOfSlot(slot)).Dur("timeout", e.cfg.PeerTimeout).
			Msg("rdm: the provider took no send to this peer for PeerTimeout: failing its queued sends")
		// Before the reports: a callback may RemovePeer, whose
		// reset of the flag must stand for the slot's next peer.
		l.unreachable = true
		e.failLane(slot, fabric.ETIMEDOUT)
		return
	}
	if due && !moved {
		l.wait.RefusedFor(now.Sub(l.since))
	}
	if due || moved {
		l.due = retryAt(now, l.since, l.wait.Wait(), e.cfg.PeerTimeout)
	}
}

// failLane reports every send parked for slot Failed with errno. It runs
// on the poller goroutine without the post guard (see retryParked); a
// callback may RemovePeer, Close, or send again. The whole lane is taken
// off before the first report: a callback that sends to the same peer
// again then finds the lane empty (and unreachable, after a timeout, so
// that its refused send fails at once) instead of parking behind the
// sends being failed, which would fail it, and its resend, for ever
// without the poller ever returning. A callback that closes the endpoint
// ends the reports: CancelAll has reported the rest.
func (e *Endpoint) failLane(slot uint32, errno fabric.Errno) {
	if !e.park.busy(slot) {
		return
	}
	for idx := e.park.detach(slot, time.Now()); idx >= 0 && !e.c.Ended(); {
		next := e.park.next[idx] // before the report: a resend may park idx again
		e.c.Complete((*kind)(e), e.keyOf(idx), poll.Result{Status: netio.Failed, Errno: errno})
		idx = next
	}
}
