package poll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/poll"
)

// TestDoDuringTheDrainWaitsForIt: while a stopping poller runs the
// functions queued before its stop, a Do from another goroutine runs only
// after them, as it would have on the poller, never beside them (an
// endpoint's teardown beside its queued completion reports would report
// keys twice).
func TestDoDuringTheDrainWaitsForIt(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	started, release := make(chan struct{}), make(chan struct{})
	var queuedDone atomic.Bool
	p.AtStop(func() {
		close(started)
		<-release
		queuedDone.Store(true)
	})
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the stopping poller did not run its AtStop function")
	}
	var sawQueuedDone atomic.Bool
	didRun := make(chan struct{})
	go func() {
		p.Do(func() { sawQueuedDone.Store(queuedDone.Load()) })
		close(didRun)
	}()
	// Give a Do that wrongly runs at once the time to do so; a right one
	// waits for release whatever the time.
	time.Sleep(20 * time.Millisecond)
	close(release)
	select {
	case <-didRun:
	case <-time.After(10 * time.Second):
		t.Fatal("Do during the drain never ran")
	}
	assert.True(t, sawQueuedDone.Load(), "Do ran beside a function queued before the stop")
	require.NoError(t, <-closed)
}
