package rdm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrWaitOnPoller is WaitInject's error when called on the poller
// goroutine (from a callback), which posts the queue it would wait for.
var ErrWaitOnPoller = errors.New("rdm: WaitInject called on the poller goroutine")

// WaitInject's sleeps: at least injectWaitMin (a shorter Go timer ends no
// sooner), at most injectWaitMax (how late it sees ctx end or the endpoint
// close), and injectWaitGuess per queued inject before it has measured the
// poller's pace.
const (
	injectWaitMin   = 10 * time.Microsecond
	injectWaitMax   = time.Millisecond
	injectWaitGuess = time.Microsecond
)

// WaitInject returns once at most half of Config.InjectQueue injects are
// queued, or ctx ends (its cause), or the endpoint has closed (Inject then
// says Closed). A sender that Inject told NoResources waits here instead of
// spinning, which on two busy cores takes the CPU the poller and the
// receiver need, or sleeping a fixed time, which either wakes it many
// times per queue or lets the poller run dry. It sleeps, on a timer (the
// poller does nothing for it but count), for the time the poller takes to
// post the queue down to half, measured from the previous waits, so that
// it wakes about once per half queue and refills the queue before the
// poller runs out (docs/performance.md, "rdm 64 B inject: the full queue's
// wait"). A timer that fires late (a busy machine runs the sleeping
// thread late) would leave the poller with nothing to send, so the poller
// wakes the waiter once the queue is down to an eighth of
// Config.InjectQueue ("rdm 64 B inject: a late WaitInject leaves the
// poller idle"). It does not allocate.
//
// The sleep's estimate assumes one waiting sender per endpoint: several
// may wait, and each returns once it sees the queue down to half, but each
// sleeps as if it alone refilled the queue, and only one at a time is
// woken by the poller; the others wake on their own timers. Called on the poller goroutine
// (from a callback) it returns ErrWaitOnPoller at once: the poller cannot
// post while it waits.
func (e *Endpoint) WaitInject(ctx context.Context) error {
	q := &e.inj
	if q.set == nil {
		return nil // not open
	}
	if e.c.Poller.OnPollerGoroutine() {
		return ErrWaitOnPoller
	}
	for {
		n := q.queued.Load()
		if n <= q.low || e.c.Ended() {
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		per := time.Duration(q.perMsg.Load())
		if per <= 0 {
			per = injectWaitGuess
		}
		d := min(max(time.Duration(n-q.low)*per, injectWaitMin), injectWaitMax)
		start := time.Now()
		q.waker.sleep(d, &q.queued)
		q.measure(n, q.queued.Load(), time.Since(start), per)
	}
}

// injectWaker lets the poller end a WaitInject sleep early: when the
// queue is down to floor injects (a quarter of the half WaitInject waits
// for, an eighth of the queue) while a waiter sleeps, the timer is late (a busy machine runs the
// waiter's thread late, or the estimate was long), and a poller that
// runs the queue dry sends the peer nothing until the waiter refills it
// (docs/performance.md, "rdm 64 B inject: a late WaitInject leaves the
// poller idle"). In the steady state the timer wakes the waiter first and
// the poller's check is one compare per inject.
//
// One waiter at a time sleeps on the endpoint's timer and can be woken;
// others (several goroutines waiting on one endpoint) sleep on their own
// timer as before, unwoken.
type injectWaker struct {
	floor    int32
	sleeping atomic.Bool   // a waiter sleeps on timer
	wake     chan struct{} // one token: the queue is down to floor
	mu       sync.Mutex    // held by the waiter that sleeps on timer
	timer    *time.Timer
}

func (w *injectWaker) init(floor int32) {
	w.floor, w.wake = max(floor, 1), make(chan struct{}, 1)
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
}

// sleep sleeps for d, or until queued is down to floor if it is the one
// waiter on the endpoint's timer.
func (w *injectWaker) sleep(d time.Duration, queued *atomic.Int32) {
	if w.wake == nil || !w.mu.TryLock() {
		time.Sleep(d)
		return
	}
	defer w.mu.Unlock()
	select {
	case <-w.wake: // a token from a wake nobody waited for
	default:
	}
	w.sleeping.Store(true)
	defer w.sleeping.Store(false)
	if queued.Load() <= w.floor { // low before the poller could see sleeping
		return
	}
	w.timer.Reset(d)
	select {
	case <-w.timer.C:
	case <-w.wake:
		w.timer.Stop()
	}
}

// left is told the injects queued after one left the queue (claim): down
// to floor with a waiter asleep, it wakes the waiter. It never blocks.
func (w *injectWaker) left(n int32) {
	if n > w.floor || !w.sleeping.Load() {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// measure updates the estimate of the poller's time per inject after a
// wait of took that saw the queue go from before to after injects: an
// average weighted 1/4 to the new wait; a wait in which the poller posted
// nothing (held by a callback, or descheduled) doubles it, up to
// injectWaitMax.
func (q *injects) measure(before, after int32, took, per time.Duration) {
	if posted := before - after; posted > 0 {
		per += (took/time.Duration(posted) - per) / 4
	} else {
		per = min(2*per, injectWaitMax)
	}
	q.perMsg.Store(int64(max(per, 1)))
}
