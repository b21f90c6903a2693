package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/cputime"
)

// Spinning shows up as CPU time, and the count never goes back. The spin
// lasts until 20 ms of CPU time were counted, not for a wall-clock time: on
// a loaded machine 50 ms of wall time bought 17 ms of CPU. A clock that
// never moved fails after 10 s.
func TestProcessCountsSpinning(t *testing.T) {
	before, err := cputime.Process()
	require.NoError(t, err)
	last := before
	for start := time.Now(); last-before < 20*time.Millisecond && time.Since(start) < 10*time.Second; {
		now, err := cputime.Process()
		require.NoError(t, err)
		require.GreaterOrEqual(t, now, last, "the count went back")
		last = now
	}
	assert.GreaterOrEqual(t, last-before, 20*time.Millisecond)
}
