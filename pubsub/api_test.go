package pubsub_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// TestPublisherBadInput: bad arguments are refused and change nothing.
func TestPublisherBadInput(t *testing.T) {
	mgr := openDomain(t, "tcp")
	_, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{pubsub.ControlTag}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{FlushInterval: -1})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Send: netio.BufferedSendParams{BufferSize: 40}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.NewPublisher(nil, "127.0.0.1:0", pubsub.PublisherConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Numbering: strings.Repeat("n", pubsub.MaxNumberingLen+1)})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.NewPublisher(mgr, "not an address", pubsub.PublisherConfig{})
	assert.Error(t, err)

	p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1}})
	require.NoError(t, err)
	assert.Equal(t, pubsub.InvalidArgument, p.Publish(2, []byte("x")), "a tag not served")
	big := make([]byte, p.MaxMessageSize()+1)
	assert.Equal(t, pubsub.InvalidArgument, p.Publish(1, big))
	assert.Equal(t, pubsub.InvalidArgument, p.PublishV(1, [][]byte{big[:10], big[10:]}))
	st, _ := p.TagStats(1)
	assert.Zero(t, st.Published, "refused messages use no sequence number")
	assert.Equal(t, pubsub.NoSubscriptions, p.Publish(1, big[:p.MaxMessageSize()]))
	assert.ErrorIs(t, p.AddTags(5, pubsub.ControlTag), netio.ErrInvalidArgument)
	assert.Equal(t, []uint64{1}, p.Tags(), "a refused AddTags adds nothing")
	require.NoError(t, p.AddTags(5, 3, 5))
	assert.Equal(t, []uint64{1, 3, 5}, p.Tags())
	assert.Equal(t, pubsub.NoSubscriptions, p.PublishStatus(5, 1, []byte("a"), []byte("b")))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	assert.Equal(t, pubsub.Closed, p.Publish(1, []byte("x")))
	assert.ErrorIs(t, p.AddTags(9), netio.ErrClosed)

	_, err = pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{OnMessage: func(pubsub.Message) {}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "no bus")
	_, err = pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed("127.0.0.1:1")})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "no callback")
	s, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(""), OnMessage: func(pubsub.Message) {}})
	require.NoError(t, err)
	assert.ErrorIs(t, s.Subscribe(t.Context()), netio.ErrInvalidArgument)
	assert.ErrorIs(t, s.Subscribe(t.Context(), pubsub.ControlTag), netio.ErrInvalidArgument)
	assert.ErrorIs(t, s.Subscribe(t.Context(), 1), pubsub.ErrNoPublisher)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Subscribe(t.Context(), 1), pubsub.ErrNoPublisher)
	assert.ErrorIs(t, s.SubscribeAsync(1), netio.ErrClosed)
}

func TestStatus(t *testing.T) {
	assert.Equal(t, "NoSubscriptions", pubsub.NoSubscriptions.String())
	assert.Equal(t, "Status(99)", pubsub.Status(99).String())
	assert.NoError(t, pubsub.OK.Err())
	assert.ErrorIs(t, pubsub.NoSubscriptions.Err(), pubsub.ErrNoSubscriptions)
	assert.ErrorIs(t, pubsub.NoResources.Err(), netio.ErrNoResources)
	assert.ErrorIs(t, pubsub.PartiallyFailed.Err(), netio.ErrFailed)
	assert.ErrorIs(t, pubsub.Closed.Err(), netio.ErrClosed)
	assert.Equal(t, netio.PartiallyFailed, pubsub.PartiallyFailed.Netio())
	assert.Equal(t, netio.Failed, pubsub.NoSubscriptions.Netio())
	assert.Equal(t, "drop", pubsub.Drop.String())
}

// TestSubscribeAsyncAndRefused: SubscribeAsync returns at once and reports
// through OnSubscribed; a tag the publisher does not serve is reported
// through OnRefused (and by Subscribe as an error), and added later it can
// be subscribed.
func TestSubscribeAsyncAndRefused(t *testing.T) {
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1, 2}})
	var mu sync.Mutex
	var subscribed, refused []uint64
	done := make(chan struct{}, 4)
	cfg := newCollector().config(p.Addr())
	cfg.OnSubscribed = func(_ string, tags []uint64) {
		mu.Lock()
		subscribed = append(subscribed, tags...)
		mu.Unlock()
		done <- struct{}{}
	}
	cfg.OnRefused = func(_ string, tags []uint64) {
		mu.Lock()
		refused = append(refused, tags...)
		mu.Unlock()
		done <- struct{}{}
	}
	sub := newSubscriber(t, mgr, cfg)
	require.NoError(t, sub.SubscribeAsync(1, 2, 3))
	for range 2 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no callback")
		}
	}
	mu.Lock()
	assert.ElementsMatch(t, []uint64{1, 2}, subscribed)
	assert.Equal(t, []uint64{3}, refused)
	mu.Unlock()
	_, ok := sub.TagStats(3)
	assert.False(t, ok, "a refused tag is not wanted any more")

	err := sub.Subscribe(ctxT(t, 10*time.Second), 2, 4)
	assert.ErrorIs(t, err, pubsub.ErrRefused)
	assert.Equal(t, []uint64{1, 2}, sub.Subscribed(), "tag 2 was subscribed before and stays")
	require.NoError(t, p.AddTags(4))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 4))
	assert.Equal(t, []uint64{1, 2, 4}, sub.Subscribed())
}

// TestSubscriberGoesAway: when a subscriber closes, the publisher ends its
// subscriptions at once (OnUnsubscribe) and its data connection's buffers
// come back; the other subscribers go on, exactly.
func TestSubscriberGoesAway(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			var unsub atomic.Int64
			p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1, 2},
				OnUnsubscribe: func(uint64, string) { unsub.Add(1) }})
			stay := newCollector()
			subStay := newSubscriber(t, mgr, stay.config(p.Addr()))
			require.NoError(t, subStay.Subscribe(ctxT(t, 10*time.Second), 1))
			regs := mgr.Stats().Registrations

			gone, err := pubsub.NewSubscriber(mgr, newCollector().config(p.Addr()))
			require.NoError(t, err)
			require.NoError(t, gone.Subscribe(ctxT(t, 10*time.Second), 1, 2))
			st, _ := p.TagStats(1)
			assert.Equal(t, 2, st.Subscribers)
			buf := make([]byte, 64)
			deadline := time.Now().Add(10 * time.Second)
			for seq := range uint64(100) {
				require.Equal(t, pubsub.OK, publishAll(t, p, 1, buf, seq, deadline))
			}
			require.NoError(t, gone.Close())
			waitFor(t, 5*time.Second, func() bool { return unsub.Load() == 2 }, "OnUnsubscribe for both tags")
			st, _ = p.TagStats(1)
			assert.Equal(t, 1, st.Subscribers)
			waitFor(t, 5*time.Second, func() bool { return mgr.Stats().Registrations == regs }, "registrations back to %d", regs)
			for seq := uint64(100); seq < 200; seq++ {
				require.Equal(t, pubsub.OK, publishAll(t, p, 1, buf, seq, deadline))
			}
			waitFor(t, 5*time.Second, func() bool { return stay.count.Load() == 200 }, "200 messages")
			checkAccounted(t, stay, 1, 200)
		})
	}
}

// TestSubscribeTimesOutWhilePublisherDown: Subscribe to a publisher that
// is not there gives up when ctx ends, with an error that says why.
func TestSubscribeTimesOutWhilePublisherDown(t *testing.T) {
	mgr := openDomain(t, "tcp")
	sub := newSubscriber(t, mgr, newCollector().config("127.0.0.1:1"))
	err := sub.Subscribe(ctxT(t, 200*time.Millisecond), 1)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Contains(t, err.Error(), "refused")
	assert.Empty(t, sub.Subscribed())
	waitFor(t, 5*time.Second, func() bool { return len(sub.Publishers()) == 0 }, "the session to end")
}
