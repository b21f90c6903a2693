package rdm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// stuckQueue opens a sender on provider with an inject queue of queue,
// full of injects to a peer the provider refuses for now for ever (they
// stay parked: PeerTimeout is an hour), so that WaitInject sleeps until
// its context ends or the endpoint closes. The test closes tx.
func stuckQueue(t *testing.T, provider, local string, queue int) *rdm.Endpoint {
	t.Helper()
	mgr := openDomain(t, provider)
	tx, err := rdm.Open(mgr, local, rdm.Config{OnData: nop, InjectQueue: queue, PeerTimeout: time.Hour})
	require.NoError(t, err)
	peer := deadPeer(t, tx)
	for i := range queue {
		require.Equal(t, netio.OK, tx.Inject([]byte{byte(i)}, peer), "inject %d is queued", i)
	}
	require.Equal(t, netio.NoResources, tx.Inject([]byte{9}, peer), "the queue is full")
	return tx
}

// TestWaitInjectEndsOnClose: a sender waiting in WaitInject for a queue
// that does not drain returns (nil; Inject then says Closed) when the
// endpoint closes, leaving no goroutine behind (goleak in TestMain).
func TestWaitInjectEndsOnClose(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			tx := stuckQueue(t, p.name, p.local, 4)
			woken := make(chan error, 1)
			go func() { woken <- tx.WaitInject(context.Background()) }()
			select {
			case err := <-woken:
				t.Fatalf("WaitInject returned (%v) while the queue was full", err)
			case <-time.After(50 * time.Millisecond):
			}
			require.NoError(t, tx.Close())
			select {
			case err := <-woken:
				assert.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("WaitInject did not return after Close")
			}
			assert.Equal(t, netio.Closed, tx.Inject([]byte{1}, rdm.Peer{}), "closed")
		})
	}
}

// TestWaitInjectSleepsWithoutAllocating: a wait that sleeps (the queue
// stays full until its context ends) allocates nothing.
func TestWaitInjectSleepsWithoutAllocating(t *testing.T) {
	const runs, each = 3, 20 * time.Millisecond
	tx := stuckQueue(t, "tcp;ofi_rxm", "127.0.0.1:0", 4)
	defer func() { assert.NoError(t, tx.Close()) }()
	// One context per call (AllocsPerRun calls once more to warm up), each
	// ending each later than the one before, made outside the count.
	ctxs := make([]context.Context, runs+1)
	for i := range ctxs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*each)
		defer cancel()
		ctxs[i] = ctx
	}
	call, slept := 0, time.Duration(0)
	allocs := testing.AllocsPerRun(runs, func() {
		start := time.Now()
		err := tx.WaitInject(ctxs[call])
		slept += time.Since(start)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		call++
	})
	assert.Equal(t, runs+1, call)
	assert.Greater(t, slept, each/2, "the waits slept")
	if !raceEnabled {
		assert.Zero(t, allocs, "a wait that sleeps allocates")
	}
}

// TestWaitInjectOnPoller: WaitInject called on the poller goroutine (from
// a callback), which is the goroutine that would post the queue, returns
// ErrWaitOnPoller at once instead of sleeping until its context ends.
func TestWaitInjectOnPoller(t *testing.T) {
	tx := stuckQueue(t, "tcp;ofi_rxm", "127.0.0.1:0", 4)
	defer func() { assert.NoError(t, tx.Close()) }()
	got := make(chan error, 1)
	var took time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdm.OnPoller(tx, func() {
		start := time.Now()
		got <- tx.WaitInject(ctx)
		took = time.Since(start)
	})
	assert.ErrorIs(t, <-got, rdm.ErrWaitOnPoller)
	assert.Less(t, took, 4*time.Second, "it returned before its context ended")
}
