package endpoint

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundPoller stands in for the poller goroutine in drainer tests: Do runs
// under its lock, Go queues for the next round, and a round is run by the
// test, with or without a read that leaves the completion queue empty.
type roundPoller struct {
	mu      sync.Mutex
	queue   []func()
	emptied uint64
	stopped bool
}

func (p *roundPoller) Do(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn()
}

// Go is called with mu held (from Do or round).
func (p *roundPoller) Go(fn func()) bool {
	if p.stopped {
		return false
	}
	p.queue = append(p.queue, fn)
	return true
}

// CQEmptied is called with mu held.
func (p *roundPoller) CQEmptied() uint64 { return p.emptied }

// round runs one poller round: a completion-queue read (empty or not),
// then what was queued before it.
func (p *roundPoller) round(emptied bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if emptied {
		p.emptied++
	}
	q := p.queue
	p.queue = nil
	for _, fn := range q {
		fn()
	}
}

func (p *roundPoller) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// awaitCheck waits until the drain's timer has handed its check to the
// poller: a confirmation queued, or the end.
func (p *roundPoller) awaitCheck(t *testing.T, ended *bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.queue) > 0 || *ended
	}, 10*drainMax, time.Millisecond, "the drain's quiet check")
}

// A drain that has been quiet for drainQuiet does not end while its poller
// has not read the completion queue empty since: the connection's last
// messages may still wait there behind other connections' completions (a
// poller kept from running sees no message either). Before the fix it
// ended at once and they were dropped (tests/storm TestConcurrentStreams/tcp
// under load lost up to 16 messages per stream, reported OK to the sender).
func TestDrainEndsOnlyAfterTheQueueWasReadEmpty(t *testing.T) {
	p := &roundPoller{}
	var d drainer
	var ended bool
	end := func() { ended = true }
	isEnded := func() bool { return ended }
	p.Do(func() { d.begin(p, isEnded, end, nil) })
	defer p.Do(d.stop)

	// The quiet verdict waits for a round that reads the queue empty.
	p.awaitCheck(t, &ended)
	for range 3 {
		p.round(false) // the queue still held completions
		p.Do(func() { assert.False(t, ended, "ended before the queue was read empty") })
	}
	// A message of this connection comes out of the backlog: the drain
	// goes on, with a new quiet period.
	p.Do(d.received)
	p.round(true)
	p.Do(func() { assert.False(t, ended, "ended although a message came while confirming") })
	assert.Zero(t, p.queued(), "a message restarts the quiet period instead of confirming on")

	// Quiet again: it ends once a round has read the queue empty.
	p.awaitCheck(t, &ended)
	p.round(false)
	p.Do(func() { assert.False(t, ended) })
	p.round(true)
	p.Do(func() { assert.True(t, ended, "ended once the queue was read empty and no message came") })
}

// A drain whose poller stopped ends at once: nothing more is delivered.
func TestDrainEndsWhenThePollerStopped(t *testing.T) {
	p := &roundPoller{}
	var d drainer
	var ended bool
	p.Do(func() { d.begin(p, func() bool { return ended }, func() { ended = true }, nil) })
	defer p.Do(d.stop)
	p.awaitCheck(t, &ended)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.round(false)
	p.Do(func() { assert.True(t, ended) })
}
