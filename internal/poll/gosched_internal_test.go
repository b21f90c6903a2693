package poll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestGoschedAfterWork: the first yield after a round with work calls
// Gosched however soon it comes (a callback may have readied a goroutine
// on the poller's P), and only the first.
func TestGoschedAfterWork(t *testing.T) {
	var g goschedGate
	t0 := time.Unix(1000, 0)
	assert.True(t, g.due(t0), "the first yield of a poller")
	for i := range 5 {
		now := t0.Add(time.Duration(i+1) * time.Microsecond)
		g.work()
		assert.True(t, g.due(now), "yield %d right after work", i)
		assert.False(t, g.due(now), "yield %d: a second one without work in between", i)
	}
}

// TestGoschedWhileIdle: between rounds without work a poller calls Gosched
// at most once per goschedEvery, and at least that often: empty rounds
// (a 10 µs spin slice each) wake no idle thread in between, and a goroutine
// readied elsewhere while the pollers hold every P waits no longer.
func TestGoschedWhileIdle(t *testing.T) {
	var g goschedGate
	t0 := time.Unix(1000, 0)
	assert.True(t, g.due(t0))
	calls := 0
	const slice = 10 * time.Microsecond
	last := t0
	for now := t0.Add(slice); now.Before(t0.Add(100 * goschedEvery)); now = now.Add(slice) {
		if g.due(now) {
			calls++
			assert.GreaterOrEqual(t, now.Sub(last), goschedEvery, "Gosched at %v, the last at %v", now.Sub(t0), last.Sub(t0))
			last = now
		} else {
			assert.Less(t, now.Sub(last), goschedEvery, "no Gosched at %v since %v", now.Sub(t0), last.Sub(t0))
		}
	}
	assert.InDelta(t, 100, calls, 2, "one Gosched per goschedEvery of empty rounds")
}
