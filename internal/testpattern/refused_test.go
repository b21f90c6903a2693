package testpattern_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/testpattern"
)

// UntilRefused returns once refusals stood for quiet without a break (a
// call taken in between starts the count again) and settled holds, and
// reports false at the deadline when they never do.
func TestUntilRefused(t *testing.T) {
	const quiet = 50 * time.Millisecond
	calls := 0
	var lastTaken time.Time
	ok := testpattern.UntilRefused(time.Now().Add(10*time.Second), quiet, func() bool {
		calls++
		if calls <= 3 || calls == 11 { // taken 3 times, refused 7 times, taken once more
			lastTaken = time.Now()
			return true
		}
		return false
	}, nil)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, time.Since(lastTaken), quiet, "the call taken between refusals starts the count again")

	settledAfter := time.Now().Add(60 * time.Millisecond)
	start := time.Now()
	ok = testpattern.UntilRefused(time.Now().Add(10*time.Second), time.Millisecond,
		func() bool { return false }, func() bool { return time.Now().After(settledAfter) })
	assert.True(t, ok)
	assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "waits for settled")

	ok = testpattern.UntilRefused(time.Now().Add(30*time.Millisecond), time.Millisecond,
		func() bool { return true }, nil)
	assert.False(t, ok, "never refused: false at the deadline")
}
