package sendcore

import "time"

// Emptier is what AfterEmptied and StallWatch need of a poller
// (poll.Poller).
type Emptier interface {
	Go(fn func()) bool
	CQEmptied() uint64
}

// AfterEmptied runs fn on p's goroutine once p has read its completion
// queue empty since the call, so that every completion written before the
// call has been delivered; or, when p stops first, with stopped true. A
// verdict of silence taken from delivered completions (a drain's quiet, an
// idle timeout, a progress timeout) is confirmed here: a poller kept from
// running (a loaded machine, a callback that blocked) delivers nothing, so
// the endpoint's completions may still wait in the queue. It is called on
// p's goroutine.
func AfterEmptied(p Emptier, fn func(stopped bool)) {
	seen := p.CQEmptied()
	var wait func()
	wait = func() {
		switch {
		case p.CQEmptied() != seen:
			fn(false)
		case !p.Go(wait): // read on
			fn(true)
		}
	}
	wait()
}

// StallWatch calls onStall once when progress reports work waiting and an
// unchanged count for timeout, unless ended says the endpoint is over. It
// checks every quarter of the timeout, so a stall is noticed after between
// timeout and 1.25 × timeout; the hot path pays nothing, because progress
// reads counters the endpoint keeps anyway. Stop the returned timer when
// the endpoint ends.
//
// The count moves only when p delivers completions, so a poller kept from
// running looks like a stall. The verdict is therefore confirmed on p's
// goroutine once p has read its queue empty (AfterEmptied): onStall runs
// there only if the count still has not moved and work still waits;
// otherwise the watch goes on. A poller that stops first ends the watch.
func StallWatch(p Emptier, timeout time.Duration, progress func() (waiting bool, count uint64), ended func() bool, onStall func()) *time.Timer {
	tick := max(timeout/4, time.Millisecond)
	var last uint64
	var stalled time.Duration
	var t *time.Timer
	confirm := func(count uint64) func(bool) {
		return func(stopped bool) {
			switch waiting, now := progress(); {
			case stopped || ended():
			case !waiting || now != count:
				t.Reset(tick)
			default:
				onStall()
			}
		}
	}
	t = time.AfterFunc(time.Hour, func() { // armed below, once assigned
		if ended() {
			return
		}
		waiting, count := progress()
		if !waiting || count != last {
			last, stalled = count, 0
		} else if stalled += tick; stalled >= timeout {
			stalled = 0 // the timer is armed again only after confirm
			p.Go(func() { AfterEmptied(p, confirm(count)) })
			return
		}
		t.Reset(tick)
	})
	t.Reset(tick)
	return t
}
