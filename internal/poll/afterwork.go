package poll

import "time"

// afterWorkSpin is how long a poller spins in C (fabric.CQ.ReadSpin) right
// after a round that did work, before its first yield. A request-reply
// peer on another core answers within about a microsecond, and a yield
// (Gosched and sched_yield, and the core given away on a loaded machine)
// at that moment lands in the reply's path (measured in
// docs/performance.md, "`cq` spins after work before it yields").
const afterWorkSpin = 2 * time.Microsecond

// When the peer shares the poller's core (a loaded machine), the reply
// cannot come while the poller spins, and every spin adds its length to
// the reply's path. So the spin must pay: each
// after-work spin that finds nothing scores afterWorkMissCost, each one
// that finds completions takes 1 off (the first often finds only the
// completion of the send just posted, a hit that says nothing of the
// reply), and from afterWorkStop on a poller spins after work only every
// afterWorkProbe-th round with work. The score stops at afterWorkCap, so
// that a poller whose peer left its core finds out within
// (afterWorkCap-afterWorkStop) probes.
const (
	afterWorkMissCost = 2
	afterWorkStop     = 16
	afterWorkCap      = 32
	afterWorkProbe    = 256
)

// afterWork decides whether a poller spins after a round with work. It
// belongs to the poller goroutine.
type afterWork struct {
	score    int    // see afterWorkMissCost
	works    uint32 // rounds with work while the score is at afterWorkStop or above
	spinning bool   // the coming round is an after-work spin
}

// spin returns how long to spin in the round after one with work.
func (a *afterWork) spin() time.Duration {
	if a.score >= afterWorkStop {
		if a.works++; a.works%afterWorkProbe != 0 {
			a.spinning = false
			return 0
		}
	}
	a.spinning = true
	return afterWorkSpin
}

// done records whether the round after one with work found completions,
// which counts only when that round was an after-work spin.
func (a *afterWork) done(found bool) {
	if !a.spinning {
		return
	}
	a.spinning = false
	switch {
	case !found:
		a.score = min(a.score+afterWorkMissCost, afterWorkCap)
	case a.score > 0:
		a.score--
	}
}
