package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/backoff"
)

func TestDoublesToTheCapAndResets(t *testing.T) {
	d := backoff.New(time.Millisecond, 10*time.Millisecond)
	assert.Equal(t, time.Millisecond, d.Wait(), "the first wait")
	var got []time.Duration
	for range 6 {
		got = append(got, d.Refused())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{2 * ms, 4 * ms, 8 * ms, 10 * ms, 10 * ms, 10 * ms}, got, "doubles, then stays at the cap")
	assert.Equal(t, 10*ms, d.Wait())
	d.Reset()
	assert.Equal(t, ms, d.Wait(), "progress brings the first wait back")
	assert.Equal(t, 2*ms, d.Refused(), "and doubles from there again")
}

func TestCapBelowFirst(t *testing.T) {
	d := backoff.New(5*time.Millisecond, time.Millisecond)
	assert.Equal(t, 5*time.Millisecond, d.Refused(), "a cap below the first wait is the first wait")
}

func TestZeroValueWaitsZero(t *testing.T) {
	var d backoff.Doubling
	assert.Zero(t, d.Refused())
	d.Reset()
	assert.Zero(t, d.Wait())
}

// TestCapNearMaxInt64: a cap near the largest Duration (a user's
// ReconnectConfig.MaxBackoff) is reached and kept, never overflowed into
// a negative or short wait.
func TestCapNearMaxInt64(t *testing.T) {
	d := backoff.New(time.Millisecond, math.MaxInt64)
	prev := d.Wait()
	for i := range 100 {
		w := d.Refused()
		assert.GreaterOrEqual(t, w, prev, "refusal %d shortened the wait", i)
		prev = w
	}
	assert.Equal(t, time.Duration(math.MaxInt64), d.Wait(), "the cap after 100 refusals")
}

// TestBackedOffOnlyAfterTheCap: a refusal that has lasted less than the
// cap leaves the first wait; from the cap on, each doubles it.
func TestBackedOffOnlyAfterTheCap(t *testing.T) {
	ms := time.Millisecond
	d := backoff.New(ms, 8*ms)
	assert.False(t, d.BackedOff(8*ms-1))
	assert.True(t, d.BackedOff(8*ms))
	for _, refusedFor := range []time.Duration{0, ms, 7 * ms, 8*ms - 1} {
		assert.Equal(t, ms, d.RefusedFor(refusedFor), "refused for %v", refusedFor)
	}
	var got []time.Duration
	for _, refusedFor := range []time.Duration{8 * ms, 9 * ms, 11 * ms, time.Second} {
		got = append(got, d.RefusedFor(refusedFor))
	}
	assert.Equal(t, []time.Duration{2 * ms, 4 * ms, 8 * ms, 8 * ms}, got)
}
