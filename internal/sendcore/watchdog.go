package sendcore

import "time"

// StallWatch calls onStall once when progress reports work waiting and an
// unchanged count for timeout, unless ended says the endpoint is over. It
// checks every quarter of the timeout, so a stall is noticed after between
// timeout and 1.25 × timeout; the hot path pays nothing, because progress
// reads counters the endpoint keeps anyway. Stop the returned timer when
// the endpoint ends.
func StallWatch(timeout time.Duration, progress func() (waiting bool, count uint64), ended func() bool, onStall func()) *time.Timer {
	tick := max(timeout/4, time.Millisecond)
	var last uint64
	var stalled time.Duration
	var t *time.Timer
	t = time.AfterFunc(time.Hour, func() { // armed below, once assigned
		if ended() {
			return
		}
		waiting, count := progress()
		if !waiting || count != last {
			last, stalled = count, 0
		} else if stalled += tick; stalled >= timeout {
			onStall()
			return
		}
		t.Reset(tick)
	})
	t.Reset(tick)
	return t
}
