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

// TestReadyPeersCountsAppliedRequests: a subscriber counts as ready once
// its subscribe request was applied whole (its Subscribe returned), not
// before it subscribed and not after it left; the config's own
// OnSubscribe still runs.
func TestReadyPeersCountsAppliedRequests(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	var ready readyPeers
	var subscribed atomic.Int64
	cfg := pubsub.PublisherConfig{Tags: []uint64{1, 2},
		OnSubscribe: func(uint64, string) { subscribed.Add(1) }}
	ready.hook(&cfg)
	pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	defer pub.Close()
	assert.Zero(t, ready.count(pub))

	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(pub.Addr()),
		OnMessage: func(pubsub.Message) {}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, sub.Subscribe(ctx, 1, 2))
	assert.Equal(t, 1, ready.count(pub), "its request was answered, so applied")
	assert.Equal(t, int64(2), subscribed.Load(), "the config's own OnSubscribe")
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 0 }, 30*time.Second, time.Millisecond)
	assert.Zero(t, ready.count(pub), "a subscriber that left")
}
