package rdm

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/slots"
)

// sleepAsync runs w.sleep(d, queued) on its own goroutine, waits until it
// sleeps on the endpoint's timer, and returns a channel closed when it
// returns.
func sleepAsync(t *testing.T, w *injectWaker, d time.Duration, queued *atomic.Int32) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.sleep(d, queued)
	}()
	require.Eventually(t, w.sleeping.Load, 10*time.Second, time.Millisecond, "the waiter sleeps on the endpoint's timer")
	return done
}

// newWaker returns a waker with floor 8 and a queue count of queued.
func newWaker(queued int32) (*injectWaker, *atomic.Int32) {
	w, q := new(injectWaker), new(atomic.Int32)
	w.init(8)
	q.Store(queued)
	return w, q
}

// returns fails the test unless done is closed within 10 s (a bound for a
// busy machine, not a timing target): the waiter returned, for why.
func returns(t *testing.T, done <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not return: " + why)
	}
}

// TestInjectWakerWakesAtFloor: a waiter sleeping on the endpoint's timer
// (an hour here, a late timer) is woken once an inject leaves the queue
// with floor injects or fewer queued, and not before.
func TestInjectWakerWakesAtFloor(t *testing.T) {
	w, queued := newWaker(64)
	done := sleepAsync(t, w, time.Hour, queued)
	w.left(9)
	select {
	case <-done:
		t.Fatal("woken above the floor")
	case <-time.After(50 * time.Millisecond):
	}
	w.left(8)
	returns(t, done, "woken at the floor")
	assert.False(t, w.sleeping.Load(), "no waiter sleeps once it returned")
}

// TestInjectWakerLowAlready: a waiter that finds the queue down to the
// floor when it would sleep does not sleep (the poller may have passed
// the floor before it saw a waiter).
func TestInjectWakerLowAlready(t *testing.T) {
	w, queued := newWaker(8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.sleep(time.Hour, queued)
	}()
	returns(t, done, "no sleep with the queue down to the floor")
}

// TestInjectWakerNoStaleWake: a wake sent with no waiter asleep leaves no
// token behind, so the next sleep lasts its time.
func TestInjectWakerNoStaleWake(t *testing.T) {
	w, queued := newWaker(64)
	w.left(0) // nobody sleeps: nothing to wake
	const d = 20 * time.Millisecond
	start := time.Now()
	w.sleep(d, queued)
	assert.GreaterOrEqual(t, time.Since(start), d, "slept its time")
}

// TestInjectWakerOtherWaiters: with one waiter on the endpoint's timer, a
// second sleeps its own time, unwoken, and returns; the first is still
// woken by the poller.
func TestInjectWakerOtherWaiters(t *testing.T) {
	w, queued := newWaker(64)
	done := sleepAsync(t, w, time.Hour, queued)
	const d = 20 * time.Millisecond
	start := time.Now()
	w.sleep(d, queued)
	assert.GreaterOrEqual(t, time.Since(start), d, "the second waiter slept its time")
	w.left(0)
	returns(t, done, "the first waiter woken")
}

// TestInjectClaimWakes: claiming a queued inject (the poller gave it to
// the provider) with the queue down to the floor wakes a sleeping
// WaitInject.
func TestInjectClaimWakes(t *testing.T) {
	var q injects
	q.init(8, 8, 2) // low 4, floor 1
	for range 2 {
		idx, ok := q.set.TakePosted(slots.SoleHolder, 0)
		require.True(t, ok)
		q.queued.Add(1)
		q.to[idx] = Peer{}
	}
	done := sleepAsync(t, &q.waker, time.Hour, &q.queued)
	_, ok := q.claim(0)
	require.True(t, ok)
	returns(t, done, "woken by the claim that left one queued")
}
