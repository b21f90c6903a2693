package rdm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// TestWaitInject: WaitInject returns at once while the inject queue has
// room; while the poller cannot post (a callback holds it) and the queue
// is full, it returns only when its context ends (with the cause), and two
// goroutines waiting stay blocked until the poller posts the queue, which
// wakes both.
func TestWaitInject(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			const queue = 4
			h := holdPoller(t, p.name, p.local, queue)
			tx, peer, in := h.tx, h.peer, h.in
			assert.NoError(t, waitInject(t, tx, context.Background()), "an empty queue has room")
			for i := range queue {
				require.Equal(t, netio.OK, tx.Inject([]byte{byte(i)}, peer), "inject %d is queued", i)
			}
			require.Equal(t, netio.NoResources, tx.Inject([]byte{9}, peer), "the queue is full")

			cause := errors.New("given up")
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(cause)
			assert.ErrorIs(t, waitInject(t, tx, ctx), cause, "an ended context ends the wait")

			woken := make(chan error, 2)
			for range 2 {
				go func() { woken <- tx.WaitInject(context.Background()) }()
			}
			select {
			case err := <-woken:
				t.Fatalf("WaitInject returned (%v) while the queue was full and the poller held", err)
			case <-time.After(50 * time.Millisecond):
			}
			h.release()
			for range 2 {
				select {
				case err := <-woken:
					assert.NoError(t, err)
				case <-time.After(10 * time.Second):
					t.Fatal("a waiter was not woken when the poller posted the queue")
				}
			}
			assert.Equal(t, netio.OK, tx.Inject([]byte{9}, peer), "room again")
			require.Eventually(t, func() bool { return in.count() == queue+2 }, 10*time.Second, time.Millisecond)
		})
	}
}

// waitInject runs e.WaitInject(ctx), failing the test if it does not
// return within 10 s.
func waitInject(t *testing.T, e *rdm.Endpoint, ctx context.Context) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.WaitInject(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("WaitInject did not return")
		return nil
	}
}
