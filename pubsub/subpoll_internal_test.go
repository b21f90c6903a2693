package pubsub

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/cq"
)

// A subscriber's own poller spins DefaultSubscriberSpinBudget unless the
// config says otherwise; a shared poller is left as it is.
func TestSubscriberRuntimeSpinBudget(t *testing.T) {
	got := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{Name: "sub"}})
	assert.Equal(t, DefaultSubscriberSpinBudget, got.PollerConfig.SpinBudget)
	assert.Equal(t, "sub", got.PollerConfig.Name, "the rest of the config is kept")
	for _, b := range []time.Duration{-1, time.Microsecond, cq.DefaultSpinBudget} {
		got := subscriberRuntime(cq.Runtime{PollerConfig: cq.Config{SpinBudget: b}})
		assert.Equal(t, b, got.PollerConfig.SpinBudget, "a budget given is kept")
	}
	shared := &cq.Poller{}
	got = subscriberRuntime(cq.Runtime{Poller: shared})
	assert.Same(t, shared, got.Poller)
	assert.Zero(t, got.PollerConfig.SpinBudget, "a shared poller's config is not the subscriber's")
}
