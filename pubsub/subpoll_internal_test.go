package pubsub

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

// A subscriber's own poller spins DefaultSubscriberSpinBudget, on a
// thread of its own when more than one P is free, unless the config says
// otherwise; a shared poller is left as it is.
func TestSubscriberRuntimeSpinBudget(t *testing.T) {
	got, locked := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{Name: "sub"}}, 2)
	assert.Equal(t, DefaultSubscriberSpinBudget, got.PollerConfig.SpinBudget)
	assert.True(t, got.PollerConfig.LockOSThread, "locked with 2 Ps free")
	assert.True(t, locked)
	assert.Equal(t, "sub", got.PollerConfig.Name, "the rest of the config is kept")

	got, locked = subscriberRuntime(cq.Runtime{}, 1)
	assert.Equal(t, DefaultSubscriberSpinBudget, got.PollerConfig.SpinBudget)
	assert.False(t, got.PollerConfig.LockOSThread, "not locked with 1 P free")
	assert.False(t, locked)

	got, locked = subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{LockOSThread: true}}, 1)
	assert.True(t, got.PollerConfig.LockOSThread, "a lock asked for is kept")
	assert.False(t, locked, "a lock asked for is not the subscriber's to count")

	got, locked = subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{Mode: cq.BusyPoll}}, 2)
	assert.False(t, got.PollerConfig.LockOSThread, "a busy poller is locked only when asked")
	assert.False(t, locked)
	assert.Equal(t, cq.BusyPoll, got.PollerConfig.Mode)

	for _, b := range []time.Duration{-1, time.Microsecond, cq.DefaultSpinBudget} {
		got, locked := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{SpinBudget: b}}, 2)
		assert.Equal(t, b, got.PollerConfig.SpinBudget, "a budget given is kept")
		assert.False(t, got.PollerConfig.LockOSThread, "a budget given leaves the thread to the config")
		assert.False(t, locked)
	}
	shared := &cq.Poller{}
	got, locked = subscriberRuntime(cq.Runtime{Poller: shared}, 2)
	assert.Same(t, shared, got.Poller)
	assert.Zero(t, got.PollerConfig.SpinBudget, "a shared poller's config is not the subscriber's")
	assert.False(t, got.PollerConfig.LockOSThread, "a shared poller's config is not the subscriber's")
	assert.False(t, locked)
}

// Subscribers lock their own pollers while that leaves a P to the rest of
// the process, and a closed subscriber's poller no longer counts.
func TestSubscriberLockedPollersLeaveAP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	require.Zero(t, lockedPollers.Load(), "no subscriber of another test is open")
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer mgr.Close()
	open := func() *Subscriber {
		s, err := NewSubscriber(mgr, SubscriberConfig{Bus: Fixed("127.0.0.1:1"), OnMessage: func(Message) {}})
		require.NoError(t, err)
		return s
	}
	a, b, c := open(), open(), open()
	assert.True(t, a.lockedPoller, "3 Ps: the first locks")
	assert.True(t, b.lockedPoller, "2 Ps free: the second locks")
	assert.False(t, c.lockedPoller, "1 P free: the third does not")
	assert.Equal(t, int32(2), lockedPollers.Load())
	require.NoError(t, b.Close())
	assert.Equal(t, int32(1), lockedPollers.Load(), "a closed subscriber's poller is not counted")
	require.NoError(t, b.Close())
	assert.Equal(t, int32(1), lockedPollers.Load(), "a second Close counts nothing")
	d := open()
	assert.True(t, d.lockedPoller, "2 Ps free again")
	for _, s := range []*Subscriber{a, c, d} {
		require.NoError(t, s.Close())
	}
	assert.Zero(t, lockedPollers.Load())
}
