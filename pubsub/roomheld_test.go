package pubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

// A refusal that stood for 100 ms against a subscriber that stopped
// reading need not stand for good: on a loaded machine the publisher's
// progress may come late (its provider still had bytes to write into a
// socket with room), and the kernel may grow the connection's socket
// buffers (tcp autotuning), so the connection takes more later. WaitRoom
// then ends with room, as it should. heldWait tells such an end from a
// wait that ended without room (a defect of WaitRoom) and establishes
// the refusal again.

// heldTries is how many times heldWait establishes a refusal before it
// gives up: each failed try is room that really came back.
const heldTries = 5

// heldWait runs WaitRoom(ctx, tag) on its own goroutine and returns where
// its answer goes once the call still sleeps past a few housekeeping
// ticks (20 ms; the 5 ms tick lets go of a refusal whose room did not
// grow over a whole tick). A call that ends before (or answers without
// sleeping) must have ended with room: nil, after a wake if it slept, and
// retake (Publish of the next message of
// tag) takes a message; then refuse establishes the refusal again and the
// wait starts over, heldTries times at most.
func heldWait(t *testing.T, ctx context.Context, p *pubsub.Publisher, tag uint64, retake func() bool, refuse func()) <-chan error {
	t.Helper()
	for try := 1; ; try++ {
		before := p.Stats()
		done := waitRoomAsync(t, ctx, p, tag)
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-done:
			require.NoError(t, err, "WaitRoom ended before the refusal could end")
			after := p.Stats()
			if after.RoomSleeps > before.RoomSleeps { // a call that slept ends by a wake (else it found room at once)
				require.Greater(t, after.RoomWakes+after.RoomTickWakes, before.RoomWakes+before.RoomTickWakes,
					"WaitRoom ended early without a wake: %+v", after)
			}
			require.True(t, retake(), "WaitRoom ended without room: %+v %+v", p.Stats(), p.Subscribers())
			require.Less(t, try, heldTries, "the refusal never stood: WaitRoom ended with room %d times", try)
			t.Logf("try %d: the refusal did not stand, WaitRoom ended with room (%d wakes, %d by the tick); refusing again",
				try, after.RoomWakes-before.RoomWakes, after.RoomTickWakes-before.RoomTickWakes)
			refuse()
		default:
			return done
		}
	}
}

// refused is a Block publisher whose subscriber stopped reading, refusing
// tag 1 (refusedPublisher).
type refused struct {
	p       *pubsub.Publisher
	sub     *pubsub.Subscriber
	c       *collector
	taken   uint64      // messages of tag 1 taken, numbered from 0
	pending func() bool // the subscriber has a message waiting
}

// wait is heldWait on tag 1: a legitimate early end takes the next
// message and publishes until refused again.
func (r *refused) wait(t *testing.T, ctx context.Context) <-chan error {
	t.Helper()
	buf := make([]byte, 48<<10)
	retake := func() bool {
		if r.p.Publish(1, payload(buf, 1, r.taken)) != pubsub.OK {
			return false
		}
		r.taken++
		r.p.Flush()
		return true
	}
	refuse := func() { r.taken = publishUntilRefused(t, r.p, 1, r.taken, r.pending) }
	return heldWait(t, ctx, r.p, 1, retake, refuse)
}

// publishZeroCopyUntilRefused publishes data on tag 1 with keys from key
// until PublishZeroCopy refuses for 100 ms (every publish in flight), and
// returns the next key.
func publishZeroCopyUntilRefused(t *testing.T, p *pubsub.Publisher, data []byte, key uint64) uint64 {
	t.Helper()
	publish := func() bool {
		if p.PublishZeroCopy(1, 0, data, key) == pubsub.NoResources {
			return false
		}
		key++
		return true
	}
	require.True(t, testpattern.UntilRefused(time.Now().Add(30*time.Second), 100*time.Millisecond, publish, nil),
		"never out of publishes in flight for good after %d", key)
	return key
}
