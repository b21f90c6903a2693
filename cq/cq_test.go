package cq_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOpenBadInput: a nil or closed manager and every out-of-range setting
// are refused with the documented sentinel, and nothing is left running
// (TestMain checks).
func TestOpenBadInput(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	closed, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, closed.Close())

	for name, tc := range map[string]struct {
		mgr  *domain.Manager
		cfg  cq.Config
		want error
	}{
		"nil manager":    {nil, cq.Config{}, netio.ErrInvalidArgument},
		"closed manager": {closed, cq.Config{}, netio.ErrClosed},
		"unknown mode":   {mgr, cq.Config{Mode: cq.BusyPoll + 1}, netio.ErrInvalidArgument},
		"negative size":  {mgr, cq.Config{Size: -1}, netio.ErrInvalidArgument},
		"size above max": {mgr, cq.Config{Size: cq.MaxSize + 1}, netio.ErrInvalidArgument},
		"negative block": {mgr, cq.Config{MaxBlock: -1}, netio.ErrInvalidArgument},
	} {
		p, err := cq.Open(tc.mgr, tc.cfg)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, p, name)
	}
}

// TestOpenClose: an opened poller runs until Close, which is idempotent and
// ends its goroutine (Done), in both modes.
func TestOpenClose(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	for _, mode := range []cq.Mode{cq.Adaptive, cq.BusyPoll} {
		p, err := cq.Open(mgr, cq.Config{Mode: mode})
		require.NoError(t, err)
		select {
		case <-p.Done():
			t.Fatalf("mode %d: done before Close", mode)
		default:
		}
		assert.Zero(t, p.Stats().Completions)
		assert.NoError(t, p.Close())
		assert.NoError(t, p.Close(), "idempotent")
		<-p.Done()
	}
}

// TestZeroPoller: a Poller not from Open is inert: Close does nothing,
// Stats is zero, Done is closed, Domain is nil; endpoints refuse it.
func TestZeroPoller(t *testing.T) {
	var p cq.Poller
	assert.NoError(t, p.Close())
	assert.Equal(t, cq.Stats{}, p.Stats())
	<-p.Done()
	assert.Nil(t, p.Domain())
	var nilPoller *cq.Poller
	assert.NoError(t, nilPoller.Close())
	assert.Nil(t, nilPoller.Domain())
	assert.False(t, p.OnPollerGoroutine())
	assert.False(t, nilPoller.OnPollerGoroutine())
}
