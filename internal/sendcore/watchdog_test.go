package sendcore

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldPoller stands in for a poller that the test runs by hand: Go queues
// work, and round runs what was queued after a read that left the queue
// empty or not. Until the test runs a round, the poller is "kept from
// running".
type heldPoller struct {
	mu      sync.Mutex
	queue   []func()
	emptied uint64
	stopped bool
}

func (p *heldPoller) Go(fn func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.queue = append(p.queue, fn)
	return true
}

// CQEmptied is read by queued work, which round runs without the lock.
func (p *heldPoller) CQEmptied() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.emptied
}

func (p *heldPoller) round(emptied bool) {
	p.mu.Lock()
	if emptied {
		p.emptied++
	}
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	for _, fn := range q {
		fn()
	}
}

func (p *heldPoller) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// TestStallWatchConfirmsOnThePoller: a stall verdict is acted on only
// after the poller has read its queue empty, and not at all when the
// count moved meanwhile (the completion was waiting in the queue); the
// watch then goes on, and a real stall still ends in exactly one onStall.
func TestStallWatchConfirmsOnThePoller(t *testing.T) {
	const timeout = 4 * time.Millisecond
	p := &heldPoller{}
	var count atomic.Uint64
	var stalls atomic.Int64
	var ended atomic.Bool
	w := StallWatch(p, timeout, func() (bool, uint64) { return true, count.Load() }, ended.Load, func() { stalls.Add(1) })
	defer w.Stop()

	require.Eventually(t, func() bool { return p.queued() > 0 }, 10*time.Second, time.Millisecond, "a verdict handed to the poller")
	p.round(false) // a read that did not empty the queue: no verdict yet
	assert.Zero(t, stalls.Load())
	count.Add(1)  // the completion that waited is delivered
	p.round(true) // and the queue read empty: progress, no stall
	assert.Zero(t, stalls.Load(), "a stall verdict while the completion waited in the queue")

	require.Eventually(t, func() bool { return p.queued() > 0 }, 10*time.Second, time.Millisecond, "the watch went on")
	p.round(true)
	p.round(true)
	assert.Equal(t, int64(1), stalls.Load(), "a real stall")
	time.Sleep(4 * timeout)
	assert.Zero(t, p.queued(), "one verdict, once")
}

// TestStallWatchEndsWithItsPoller: a poller that stops before it confirms
// ends the watch without a stall.
func TestStallWatchEndsWithItsPoller(t *testing.T) {
	p := &heldPoller{}
	var stalls atomic.Int64
	w := StallWatch(p, 4*time.Millisecond, func() (bool, uint64) { return true, 0 }, func() bool { return false },
		func() { stalls.Add(1) })
	defer w.Stop()
	require.Eventually(t, func() bool { return p.queued() > 0 }, 10*time.Second, time.Millisecond)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.round(false) // AfterEmptied reads on: Go refuses, so it reports stopped
	assert.Zero(t, stalls.Load())
}
