package cq

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/poll"
)

// TestPublicConstantsMatchThePoller: cq's documented values are literals,
// so that go doc shows them; the poller applies its own. They must agree.
func TestPublicConstantsMatchThePoller(t *testing.T) {
	assert.Equal(t, poll.DefaultSpinBudget, DefaultSpinBudget)
	assert.Equal(t, poll.DefaultMaxBlock, DefaultMaxBlock)
	assert.Equal(t, poll.DefaultSize, DefaultSize)
	assert.Equal(t, poll.MaxSize, MaxSize)
	assert.Equal(t, poll.StretchLimit, StretchLimit)
	assert.Equal(t, poll.Adaptive, poll.Mode(Adaptive))
	assert.Equal(t, poll.BusyPoll, poll.Mode(BusyPoll))
}
