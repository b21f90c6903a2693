package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/cputime"
)

// Spinning shows up as CPU time, and the count never goes back. The loop
// spins until 20 ms of CPU are counted rather than for a fixed wall time: on
// a loaded machine 50 ms of wall clock can hold far less than 20 ms of CPU.
// A count that stood still would spin until the 10 s deadline and fail.
func TestProcessCountsSpinning(t *testing.T) {
	before, err := cputime.Process()
	require.NoError(t, err)
	after := before
	for deadline := time.Now().Add(10 * time.Second); after-before < 20*time.Millisecond && time.Now().Before(deadline); {
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
		now, err := cputime.Process()
		require.NoError(t, err)
		require.GreaterOrEqual(t, now, after, "the count went back")
		after = now
	}
	assert.GreaterOrEqual(t, after-before, 20*time.Millisecond)
}
