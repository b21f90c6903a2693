package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

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

// A thread that sleeps in the kernel is switched off its CPU voluntarily
// every time: five sleeps count five voluntary switches at least (more
// from the runtime's own threads), and neither count goes back.
func TestSwitchesCountSleeps(t *testing.T) {
	vol0, invol0, err := cputime.Switches()
	require.NoError(t, err)
	for range 5 {
		ts := unix.NsecToTimespec(int64(time.Millisecond))
		require.NoError(t, unix.Nanosleep(&ts, nil))
	}
	vol1, invol1, err := cputime.Switches()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, vol1-vol0, int64(5))
	assert.GreaterOrEqual(t, invol1, invol0)
}
