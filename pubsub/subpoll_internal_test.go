package pubsub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/cq"
)

// A subscriber's own poller spins DefaultSubscriberSpinBudget, on a
// thread of its own when the process has more than one P, unless the
// config says otherwise; a shared poller is left as it is.
func TestSubscriberRuntimeSpinBudget(t *testing.T) {
	got := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{Name: "sub"}}, 2)
	assert.Equal(t, DefaultSubscriberSpinBudget, got.PollerConfig.SpinBudget)
	assert.True(t, got.PollerConfig.LockOSThread, "locked with 2 Ps")
	assert.Equal(t, "sub", got.PollerConfig.Name, "the rest of the config is kept")

	got = subscriberRuntime(cq.Runtime{}, 1)
	assert.Equal(t, DefaultSubscriberSpinBudget, got.PollerConfig.SpinBudget)
	assert.False(t, got.PollerConfig.LockOSThread, "not locked with 1 P")

	got = subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{LockOSThread: true}}, 1)
	assert.True(t, got.PollerConfig.LockOSThread, "a lock asked for is kept")

	got = subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{Mode: cq.BusyPoll}}, 2)
	assert.False(t, got.PollerConfig.LockOSThread, "a busy poller is locked only when asked")
	assert.Equal(t, cq.BusyPoll, got.PollerConfig.Mode)

	for _, b := range []time.Duration{-1, time.Microsecond, cq.DefaultSpinBudget} {
		got := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{SpinBudget: b}}, 2)
		assert.Equal(t, b, got.PollerConfig.SpinBudget, "a budget given is kept")
		assert.False(t, got.PollerConfig.LockOSThread, "a budget given leaves the thread to the config")
	}
	shared := &cq.Poller{}
	got = subscriberRuntime(cq.Runtime{Poller: shared}, 2)
	assert.Same(t, shared, got.Poller)
	assert.Zero(t, got.PollerConfig.SpinBudget, "a shared poller's config is not the subscriber's")
	assert.False(t, got.PollerConfig.LockOSThread, "a shared poller's config is not the subscriber's")
}
