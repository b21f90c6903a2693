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
// A Block subscriber of tag 1 that stopped reading has refused (its
// refusal stands for the whole test); a caller publishing on tag 2, whose
// subscriber reads a message a millisecond, waits in WaitRoom(ctx, 2) on
// every NoResources, and each wait ends with room, none at its 5 s
// deadline; tag 2's subscriber gets everything in order.
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
	publishUntilRefused(t, p, 1, stalledPending)
	buf := make([]byte, 48<<10)
	for seq := range uint64(messages) {
		for p.Publish(2, payload(buf, 2, seq)) == pubsub.NoResources {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := p.WaitRoom(ctx, 2)
			cancel()
			require.NoError(t, err, "seq %d: a wait on tag 2 held by tag 1's refusal: %+v", seq, p.Stats())
		}
	}
	flushUntil(t, p, func() bool { return slow.count.Load() == messages }, "%d messages", messages)
	checkInOrder(t, slow, 2, 0, messages)
	assert.Empty(t, slow.problems())
	assert.True(t, stalledPending(), "tag 1's refusal ended: the test showed nothing")
	assert.NotZero(t, p.Stats().RoomSleeps, "tag 2 never waited: its subscriber kept up, the test showed nothing")
	assert.Equal(t, pubsub.NoResources, p.Publish(1, payload(buf, 1, 0)), "tag 1 still refuses")
}
