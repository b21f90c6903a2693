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
// stays full until its context ends, after two sleeps) allocates nothing.
func TestWaitInjectSleepsWithoutAllocating(t *testing.T) {
	const runs, sleeps = 3, 2
	tx := stuckQueue(t, "tcp;ofi_rxm", "127.0.0.1:0", 4)
	defer func() { assert.NoError(t, tx.Close()) }()
	ctx := &endsAfter{Context: context.Background()}
	calls, slept := 0, time.Duration(0)
	allocs := testing.AllocsPerRun(runs, func() {
		ctx.checks = sleeps
		start := time.Now()
		err := tx.WaitInject(ctx)
		slept += time.Since(start)
		assert.ErrorIs(t, err, context.Canceled)
		calls++
	})
	assert.Equal(t, runs+1, calls)
	assert.GreaterOrEqual(t, slept, time.Duration(calls*sleeps)*10*time.Microsecond, "each wait slept twice, 10 µs at least each")
	if !raceEnabled {
		assert.Zero(t, allocs, "a wait that sleeps allocates")
	}
}

// endsAfter is a context that ends (Canceled) once Err has been asked
// checks times, whatever the time: a wait on it sleeps as often on a
// loaded machine as on a quiet one.
type endsAfter struct {
	context.Context
	checks int
}

func (c *endsAfter) Err() error {
	if c.checks--; c.checks < 0 {
		return context.Canceled
	}
	return nil
}

// TestWaitInjectOnPoller: WaitInject called on the poller goroutine (from
// a callback), which is the goroutine that would post the queue, returns
// ErrWaitOnPoller at once instead of sleeping until its context ends.
func TestWaitInjectOnPoller(t *testing.T) {
	tx := stuckQueue(t, "tcp;ofi_rxm", "127.0.0.1:0", 4)
	defer func() { assert.NoError(t, tx.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	rdm.OnPoller(tx, func() { err = tx.WaitInject(ctx) })
	assert.ErrorIs(t, err, rdm.ErrWaitOnPoller, "not the context's end: it returned at once")
}
