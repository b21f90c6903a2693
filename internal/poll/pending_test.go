package poll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/poll"
)

// pender is a recorder that says it has operations pending while pending
// is set, and counts how often the poller asked.
type pender struct {
	*recorder
	pending atomic.Bool
	asked   atomic.Int64
}

func (p *pender) Pending() bool {
	p.asked.Add(1)
	return p.pending.Load()
}

// TestPendingHoldsABlindPoller: a poller whose completion queue has no wait
// descriptor does not block while a handler has operations pending, for
// pendingHoldLimit (16) spin budgets after its last completion; once
// nothing is pending it blocks. The time of the first block is observed
// late, never early, so the lower bound holds on a loaded machine too.
func TestPendingHoldsABlindPoller(t *testing.T) {
	const budget = time.Millisecond
	m := openManager(t)
	h := &pender{recorder: newRecorder()}
	h.pending.Store(true)
	start := time.Now()
	p := openPoller(t, m, poll.Config{SpinBudget: budget, NoCQWait: true})
	_, err := p.Register(h)
	require.NoError(t, err)
	eventually(t, func() bool { return p.Stats().Sleeps > 0 }, "the poller to block once the hold ends")
	assert.GreaterOrEqual(t, time.Since(start), 16*budget, "blocked before 16 spin budgets with operations pending")
	assert.Positive(t, h.asked.Load(), "the poller asked the handler")

	// Nothing pending: the hold does not apply; the poller keeps blocking.
	h.pending.Store(false)
	before := p.Stats().Sleeps
	eventually(t, func() bool { return p.Stats().Sleeps >= before+5 }, "blocks at 1 ms with nothing pending")
	require.NoError(t, p.Close())
}

// TestPendingIgnoredWithAWaitDescriptor: a poller that can block on its
// queue's descriptor is woken by traffic, so a pending handler does not
// keep it spinning.
func TestPendingIgnoredWithAWaitDescriptor(t *testing.T) {
	m := openManager(t)
	h := &pender{recorder: newRecorder()}
	h.pending.Store(true)
	p := openPoller(t, m, poll.Config{SpinBudget: 10 * time.Microsecond})
	_, err := p.Register(h)
	require.NoError(t, err)
	eventually(t, func() bool { return p.Stats().Sleeps > 0 }, "the poller to block")
	assert.Zero(t, h.asked.Load(), "a poller with a wait descriptor never asks")
	require.NoError(t, p.Close())
}
