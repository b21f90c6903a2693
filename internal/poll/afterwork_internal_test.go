package poll

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// hop plays one ping-pong hop as a poller sees it: the spin after the
// reply's post finds the send's own completion, and the next one finds
// the peer's answer (replied) or nothing.
func hop(a *afterWork, replied bool) (spun int) {
	for _, found := range []bool{true, replied} {
		if a.spin() > 0 {
			spun++
		}
		a.done(found)
	}
	return spun
}

// TestAfterWorkSpinsWhileItCatches: a peer that answers during the spin
// keeps the poller spinning after work for ever.
func TestAfterWorkSpinsWhileItCatches(t *testing.T) {
	var a afterWork
	for i := range 10 * afterWorkProbe {
		if !assert.Equal(t, 2, hop(&a, true), "hop %d", i) {
			return
		}
	}
}

// TestAfterWorkStopsWhenItMisses: a peer that cannot answer while the
// poller spins (one core for both) stops the spinning after a few hops,
// although the send's own completion is found every time, and leaves only
// probes, one per afterWorkProbe rounds with work.
func TestAfterWorkStopsWhenItMisses(t *testing.T) {
	var a afterWork
	hops := 0
	for ; hop(&a, false) == 2; hops++ {
	}
	assert.GreaterOrEqual(t, hops, afterWorkStop/afterWorkMissCost, "every round spins until the score reaches afterWorkStop")
	assert.LessOrEqual(t, hops, afterWorkStop, "a hit and a miss per hop stop it within afterWorkStop hops")
	spun := 0
	const probeHops = 100 * afterWorkProbe
	for range probeHops {
		spun += hop(&a, false)
	}
	assert.LessOrEqual(t, spun, 2*probeHops/afterWorkProbe*2, "about one spin per afterWorkProbe rounds with work")
	assert.Positive(t, spun, "probes go on")
}

// TestAfterWorkComesBack: once the peer answers again, the probes bring the
// score down and the spinning back.
func TestAfterWorkComesBack(t *testing.T) {
	var a afterWork
	for range 4 * afterWorkCap {
		hop(&a, false)
	}
	assert.GreaterOrEqual(t, a.score, afterWorkStop-1, "stopped, but for a probe")
	assert.LessOrEqual(t, a.score, afterWorkCap, "the score stops at afterWorkCap")
	hops := 0
	for ; a.score >= afterWorkStop; hops++ {
		hop(&a, true)
	}
	assert.LessOrEqual(t, hops, (afterWorkCap-afterWorkStop+1)*afterWorkProbe, "back within the cap's probes")
	assert.Equal(t, 2, hop(&a, true), "spinning after every round with work again")
}
