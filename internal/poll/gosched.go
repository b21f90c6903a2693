package poll

import "time"

// goschedEvery is the longest a poller goes between two runtime.Gosched
// calls while its rounds find no work (see goschedGate).
const goschedEvery = 100 * time.Microsecond

// goschedGate decides whether a yield between empty polls calls
// runtime.Gosched. It belongs to the poller goroutine.
//
// A Gosched does two things. It hands the poller's P to a goroutine that
// waits for one: one a callback of this poller readied (it sits in this
// P's run queue, and the wake-up the runtime sends for it reaches another
// thread only later), or, when pollers hold every P, any other. And, when
// a P is idle, it wakes an idle thread (goschedImpl's wakep), which finds
// nothing, parks again and, on two cores, takes the core from the peer
// process for that while: 15-27 k context switches per 10,000 messages of
// a two-process stream against C's 2 k (docs/performance.md, "`cq` yields
// between empty polls: a Gosched after work, else every 100 µs").
//
// So a poller calls Gosched in the first yield after a round with work,
// as before, for what its callbacks readied, and otherwise at most every
// goschedEvery, for goroutines readied elsewhere while the pollers hold
// every P (ten of the 10 µs spin slices; Go's own preemption would take
// 10 ms).
type goschedGate struct {
	worked bool      // a round did work since the last Gosched
	last   time.Time // when the last Gosched was
}

// work records a round that did work (completions, events or queued
// functions): its callbacks may have readied goroutines.
func (g *goschedGate) work() { g.worked = true }

// due reports whether the yield at now calls Gosched, and if so counts it
// as done at now.
func (g *goschedGate) due(now time.Time) bool {
	if !g.worked && now.Sub(g.last) < goschedEvery {
		return false
	}
	g.worked, g.last = false, now
	return true
}
