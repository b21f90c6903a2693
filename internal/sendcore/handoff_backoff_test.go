package sendcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/backoff"
)

// TestStalledDrainBacksOff: once the stall has lasted handOffRetryMax,
// each of the retry timer's drains that the provider refuses before it
// took anything doubles the wait before the next, up to handOffRetryMax;
// before that the wait stays HandOffRetry; a completion's drain refused
// leaves the wait as it is; a post taken brings it back to HandOffRetry,
// also when the same drain is refused after it, and starts the stall
// anew.
func TestStalledDrainBacksOff(t *testing.T) {
	refuseFrom := uint32(0) // the provider refuses the keys from this one on
	var posted []uint32
	c := runCore(t, nil, func(_ *fabric.Endpoint, key uint32, _ int) fabric.Errno {
		if key >= refuseFrom {
			return fabric.EAGAIN
		}
		posted = append(posted, key)
		return 0
	})
	c.hand.wait = backoff.New(HandOffRetry, handOffRetryMax)
	drainQueued(t, c, 1, 2)
	require.True(t, c.hand.stalled.Load(), "the drain stalled")
	assert.Equal(t, HandOffRetry, c.hand.wait.Wait(), "the first wait")
	require.False(t, c.hand.since.IsZero(), "the stall's start")

	for range 8 {
		c.drainFromTimer()
	}
	assert.Equal(t, HandOffRetry, c.hand.wait.Wait(), "a stall younger than the cap: the timer retries every HandOffRetry")

	c.hand.since = time.Now().Add(-handOffRetryMax) // the stall has lasted the cap
	var waits []time.Duration
	for range 8 {
		c.drainFromTimer()
		waits = append(waits, c.hand.wait.Wait())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 64 * ms, 64 * ms}, waits,
		"the timer's refused retries double the wait up to the cap")
	c.AfterCompletion()
	assert.Equal(t, handOffRetryMax, c.hand.wait.Wait(), "a completion's refused drain doubles nothing")
	assert.Empty(t, posted)

	refuseFrom = 2 // the provider takes the first queued, refuses the next
	c.drainFromTimer()
	assert.Equal(t, []uint32{1}, posted)
	assert.True(t, c.hand.stalled.Load(), "stalled again at the second")
	assert.Equal(t, HandOffRetry, c.hand.wait.Wait(), "a post taken brings the first wait back")
	c.drainFromTimer()
	assert.Equal(t, HandOffRetry, c.hand.wait.Wait(), "and starts the stall anew")
	c.hand.since = time.Now().Add(-handOffRetryMax)
	c.drainFromTimer()
	assert.Equal(t, 2*ms, c.hand.wait.Wait(), "the next refused retry past the cap doubles from there")

	refuseFrom = 100
	c.drainFromTimer()
	assert.Equal(t, []uint32{1, 2}, posted)
	assert.False(t, c.hand.stalled.Load())
	assert.Equal(t, HandOffRetry, c.hand.wait.Wait())
	assert.False(t, c.hand.timerDrain, "a drain forgets it was the timer's")
	assert.True(t, c.hand.since.IsZero(), "no stall")
}
