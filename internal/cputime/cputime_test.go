package cputime_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/cputime"
)

// Spinning for a while shows up as CPU time, and the count never goes back.
func TestProcessCountsSpinning(t *testing.T) {
	before, err := cputime.Process()
	require.NoError(t, err)
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	after, err := cputime.Process()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, 20*time.Millisecond)
}
