package rdm

import (
	"testing"
	"time"

	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/backoff"
	"github.com/netio-go/netio/internal/sendcore"
)

// LanePost posts one send to a peer (parking.post).
type LanePost = func(ep *fabric.Endpoint, key uint32, n int, to Peer) fabric.Errno

// WrapLanePost puts wrap between e's sends (queued and parked) and the
// provider, on the poller goroutine; e then posts no runs of injects, so
// that every send goes through wrap.
func WrapLanePost(e *Endpoint, wrap func(LanePost) LanePost) {
	e.c.Poller.Do(func() { e.park.post, e.run.singly = wrap(e.park.post), true })
}

// RunPost posts a run of injects (fabric.Endpoint.InjectRunTo).
type RunPost = func(ep *fabric.Endpoint, mem []byte, off, lens []uint32, dest fabric.Addr) (int, fabric.Errno)

// WrapRunPost puts run between e's runs of injects and the provider and,
// unless nil, lane between its single sends and the provider, on the
// poller goroutine; e goes on posting runs.
func WrapRunPost(e *Endpoint, run func(RunPost) RunPost, lane func(LanePost) LanePost) {
	e.c.Poller.Do(func() {
		e.run.post = run(e.run.post)
		if lane != nil {
			e.park.post = lane(e.park.post)
		}
	})
}

// WrapHandOffPost puts wrap between e's hand-off queue and its post.
func WrapHandOffPost(e *Endpoint, wrap func(sendcore.PostFunc) sendcore.PostFunc) {
	e.c.Poller.Do(func() { e.c.SetPostFunc(wrap(e.c.PostFunc())) })
}

// IsInjectKey reports whether a send key is an inject's.
func IsInjectKey(key uint32) bool { return key&injectKey != 0 }

// SetPostDirect sets whether e's sends made on the poller goroutine are
// posted at once (sendcore.Core.SetPostDirect), on the poller goroutine.
func SetPostDirect(e *Endpoint, on bool) {
	e.c.Poller.Do(func() { e.c.SetPostDirect(on) })
}

// OnPoller runs fn on e's poller goroutine and returns when it has run.
func OnPoller(e *Endpoint, fn func()) { e.c.Poller.Do(fn) }

// UntrackInjects makes every inject of e untracked (fi_inject, no
// completion), so that only a buffered send's completion confirms them.
func UntrackInjects(e *Endpoint) {
	e.c.Poller.Do(func() { e.inj.ok.set = nil })
}

// FillReceiveQueue posts receives into e's first buffer until the provider
// refuses one, and returns how many it took. Call it on e's poller
// goroutine (from OnData). Their completions name a buffer past e's, which
// receiveCompleted ignores; send nothing more to e.
func FillReceiveQueue(e *Endpoint) int {
	ep, ok := e.c.Guard.Acquire()
	if !ok {
		return 0
	}
	defer e.c.Guard.Release()
	b, ctx := e.recv.Piece(0), e.c.Owner.Context(uint32(e.recv.Len())|recvKey)
	n := 0
	for n < 1<<20 && ep.Recv(b.Addr, len(b.Bytes), b.Desc, ctx) == 0 {
		n++
	}
	return n
}

// PeerSlot returns p's slot in the peer table, which a peer added after
// p's removal may take again.
func PeerSlot(p Peer) uint32 { return p.slot }

// RefuseTrackedSends makes every tracked inject's fi_send of e return
// errno without posting (errno 0 restores the real one).
func RefuseTrackedSends(e *Endpoint, errno fabric.Errno) {
	e.c.Poller.Do(func() {
		e.inj.ok.sendTo = (*fabric.Endpoint).SendTo
		if errno != 0 {
			e.inj.ok.sendTo = func(*fabric.Endpoint, uintptr, int, uintptr, fabric.Addr, uint64) fabric.Errno { return errno }
		}
	})
}

// ParkRetry and ParkRetryMax are the first wait and the cap of the wait
// between the timer's retries of a refused lane.
const ParkRetry, ParkRetryMax = parkRetry, parkRetryMax

// SetParkRetry sets the first wait and the cap of the wait between the
// timer's retries of every lane of e (the cap is also how long a lane is
// refused before it backs off), on the poller goroutine.
func SetParkRetry(e *Endpoint, first, limit time.Duration) {
	e.c.Poller.Do(func() {
		for i := range e.park.lanes {
			e.park.lanes[i].wait = backoff.New(first, limit)
		}
	})
}

// RetryParkedAllocs is the allocations a completion's retry of e's lanes
// makes (testing.AllocsPerRun over runs), measured on the poller.
func RetryParkedAllocs(e *Endpoint, runs int) (allocs float64) {
	e.c.Poller.Do(func() { allocs = testing.AllocsPerRun(runs, func() { e.retryParked(noLane) }) })
	return allocs
}

// StopParkTimer stops the lanes' retry timer of e and reports whether it
// was still armed.
func StopParkTimer(e *Endpoint) bool { return e.park.timer.Stop() }

// LaneRetry returns, for p's lane, the wait the timer's next retry of it
// was scheduled with, when its head began waiting and when that retry is
// due. Call it on e's poller goroutine (from a LanePost wrapper, whose
// call by the timer's retry is the retry that was due).
func LaneRetry(e *Endpoint, p Peer) (wait time.Duration, since, due time.Time) {
	l := &e.park.lanes[p.slot]
	return l.wait.Wait(), l.since, l.due
}

// InjectsQueuedTo returns how many of e's injects to p hold a queue slot:
// taken by Inject and not yet handed to the provider (queued, or parked in
// p's lane).
func InjectsQueuedTo(e *Endpoint, p Peer) int {
	if int(p.slot) >= len(e.inj.perPeer) {
		return 0
	}
	return int(e.inj.perPeer[p.slot].Load())
}
