package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// TestPubPeersKeepsDepartedSubscribers: a subscriber that took what it
// wanted and left before the publisher reported is still in the report,
// with what was delivered to it, and a subscriber counts as ready only
// once its subscribe request was applied (TestPublishSubscribeInProcess
// under load: the report listed 0 or 1 of its 2 subscribers).
func TestPubPeersKeepsDepartedSubscribers(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	var peers pubPeers
	var unsubscribed atomic.Int64
	cfg := pubsub.PublisherConfig{Tags: []uint64{1, 2},
		OnUnsubscribe: func(uint64, string) { unsubscribed.Add(1) }} // kept beside the hook
	peers.hook(&cfg)
	pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	defer pub.Close()
	peers.start(pub)
	assert.Zero(t, peers.readyCount(pub))

	var got atomic.Int64
	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(pub.Addr()),
		OnMessage: func(pubsub.Message) { got.Add(1) }})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, sub.Subscribe(ctx, 1, 2))
	require.Equal(t, 1, peers.readyCount(pub), "its request was answered, so applied")
	for tag := range uint64(2) {
		require.Equal(t, pubsub.OK, pub.Publish(tag+1, []byte("message")))
	}
	require.Eventually(t, func() bool { return got.Load() == 2 }, 30*time.Second, time.Millisecond)
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 0 }, 30*time.Second, time.Millisecond)

	all := peers.all(pub)
	require.Len(t, all, 1, "the subscriber that left")
	assert.Equal(t, uint64(2), all[0].Delivered)
	assert.Len(t, all[0].Tags, 2, "the tags it had")
	assert.Equal(t, int64(2), unsubscribed.Load(), "the config's own OnUnsubscribe still runs")
	assert.Zero(t, peers.readyCount(pub))
}
