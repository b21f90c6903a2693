package rdm

import (
	"context"
	"errors"
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
// times per queue or lets the poller run dry. It sleeps, on a timer of its
// own goroutine (the poller does nothing for it but count), for the time
// the poller takes to post the queue down to half, measured from the
// previous waits, so that it wakes about once per half queue and refills
// the queue before the poller runs out (docs/performance.md, "rdm 64 B
// inject: the full queue's wait"). It does not allocate.
//
// The sleep's estimate assumes one waiting sender per endpoint: several
// may wait, and each returns once it sees the queue down to half, but each
// sleeps as if it alone refilled the queue. Called on the poller goroutine
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
		time.Sleep(d)
		q.measure(n, q.queued.Load(), time.Since(start), per)
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
