package pubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// TestWaitRoomOtherTag: WaitRoom waits only for what refuses its own tag.
// A Block subscriber of tag 1 that stopped reading has refused (refused
// again whenever its refusal ended with room after all); a caller
// publishing on tag 2, whose subscriber reads a message a millisecond,
// waits in WaitRoom(ctx, 2) on every NoResources, and each wait ends with
// room, none at its 5 s deadline, some of them having slept while tag 1's
// refusal stood throughout; tag 2's subscriber gets everything in order.
func TestWaitRoomOtherTag(t *testing.T) {
	const messages = 200
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1, 2}, Mode: pubsub.Buffered, Policy: pubsub.Block,
		FlushInterval: time.Minute, Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 4}})
	release := make(chan struct{})
	defer close(release)
	stalled, slow := newCollector(), newCollector()
	stallUntil(stalled, release)
	slow.stall = func() { time.Sleep(time.Millisecond) }
	for i, c := range []*collector{stalled, slow} {
		cfg := c.config(p.Addr())
		cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 2}
		require.NoError(t, newSubscriber(t, mgr, cfg).Subscribe(ctxT(t, 10*time.Second), uint64(i+1)))
	}
	stalledPending := func() bool { si, _ := subscriberOf(p, 1); return si.Pending }
	next1 := publishUntilRefused(t, p, 1, 0, stalledPending)
	buf := make([]byte, 48<<10)
	var heldSleeps int // tag 2's waits that slept while tag 1's refusal stood throughout
	for seq := range uint64(messages) {
		for p.Publish(2, payload(buf, 2, seq)) == pubsub.NoResources {
			// Tag 1's refusal may end with room after all (late progress
			// under load, tcp autotuning growing the socket buffers): then
			// refuse it again, so that the waits are made beside it.
			if !stalledPending() {
				next1 = publishUntilRefused(t, p, 1, next1, stalledPending)
			}
			sleeps := p.Stats().RoomSleeps
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.WaitRoom(ctx, 2)
			cancel()
			require.NoError(t, err, "seq %d: a wait on tag 2 held by tag 1's refusal: %+v", seq, p.Stats())
			// Pending goes back on only by a Publish on tag 1, none here:
			// pending now means pending throughout the wait.
			if stalledPending() && p.Stats().RoomSleeps > sleeps {
				heldSleeps++
			}
		}
	}
	flushUntil(t, p, func() bool { return slow.count.Load() == messages }, "%d messages", messages)
	checkInOrder(t, slow, 2, 0, messages)
	assert.Empty(t, slow.problems())
	assert.NotZero(t, heldSleeps, "tag 2 never waited while tag 1 refused, the test showed nothing: %+v", p.Stats())
	t.Logf("%d of tag 2's waits slept beside tag 1's refusal: %+v", heldSleeps, p.Stats())
}
