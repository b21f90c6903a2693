package promstats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
	"github.com/netio-go/netio/stats"
	"github.com/netio-go/netio/stats/promstats"
)

// fixedSource is a Source whose snapshot is given.
type fixedSource stats.Snapshot

func (f fixedSource) Snapshot() stats.Snapshot { return stats.Snapshot(f) }

// gatherUnlabelled scrapes c and returns the value of every metric whose
// only label is the provider, by name.
func gatherUnlabelled(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 {
				continue
			}
			switch {
			case m.Counter != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestSubscriberCountersSummed: every subscriber counter of the snapshot
// is exported, summed over the subscribers, each from its own field
// (distinct values, so that one read from another field shows).
func TestSubscriberCountersSummed(t *testing.T) {
	src := fixedSource{Provider: "tcp", Subscribers: []stats.Subscriber{
		{ID: 1, Messages: 100, Bytes: 6400, Gaps: 2, Missed: 30, Moves: 1, Reconnects: 4},
		{ID: 2, Messages: 200, Bytes: 12800, Gaps: 3, Missed: 50, Moves: 2, Reconnects: 5},
	}}
	got := gatherUnlabelled(t, promstats.New(src))
	for name, want := range map[string]float64{
		"netio_pubsub_received_messages_total": 300,
		"netio_pubsub_received_bytes_total":    19200,
		"netio_pubsub_gaps_total":              5,
		"netio_pubsub_missed_messages_total":   80,
		"netio_pubsub_moves_total":             3,
		"netio_pubsub_reconnects_total":        9,
	} {
		assert.Equal(t, want, got[name], name)
		assert.Contains(t, got, name)
	}
}

// TestPublisherRoomCountersSummed: WaitRoom's counters are exported,
// summed over the live publishers, each from its own field.
func TestPublisherRoomCountersSummed(t *testing.T) {
	src := fixedSource{Provider: "tcp", Publishers: []stats.Publisher{
		{ID: 1, RoomSleeps: 10, RoomWakes: 7, RoomTickWakes: 2},
		{ID: 2, RoomSleeps: 20, RoomWakes: 9, RoomTickWakes: 3},
	}}
	got := gatherUnlabelled(t, promstats.New(src))
	for name, want := range map[string]float64{
		"netio_pubsub_room_sleeps_total":     30,
		"netio_pubsub_room_wakes_total":      16,
		"netio_pubsub_room_tick_wakes_total": 5,
	} {
		assert.Contains(t, got, name)
		assert.Equal(t, want, got[name], name)
	}
}

// TestWaitRoomCountersScraped: a real WaitRoom sleeps (a ZeroCopy
// publisher's publishes are all in flight to a subscriber that stopped
// reading) and is woken when the subscriber reads again; a scrape then
// shows the sleep and the wake, as the publisher's Stats counts them.
func TestWaitRoomCountersScraped(t *testing.T) {
	pmgr, smgr := openDomain(t), openDomain(t)
	pub, err := pubsub.NewPublisher(pmgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1},
		Mode: pubsub.ZeroCopy, Policy: pubsub.Drop, MaxInFlight: 4})
	require.NoError(t, err)
	defer func() { assert.NoError(t, pub.Close()) }()
	stalled := make(chan struct{})
	release := sync.OnceFunc(func() { close(stalled) })
	sub, err := pubsub.NewSubscriber(smgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(pub.Addr()),
		OnMessage: func(pubsub.Message) { // stops reading (bounded)
			select {
			case <-stalled:
			case <-time.After(time.Minute):
			}
		}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sub.Close()) }()
	defer release() // before sub.Close, which waits for the stalled callback
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, sub.Subscribe(ctx, 1))

	data := make([]byte, 48<<10) // never written while in flight
	var key uint64
	publish := func() bool {
		if pub.PublishZeroCopy(1, 0, data, key) == pubsub.NoResources {
			return false
		}
		key++
		return true
	}
	refuse := func() { // publishes until refused for 100 ms
		require.True(t, testpattern.UntilRefused(time.Now().Add(waitFor), 100*time.Millisecond, publish, nil),
			"never out of publishes in flight for good after %d", key)
	}
	refuse()
	// A refusal that stood for 100 ms need not stand for good on a loaded
	// machine (late progress, the kernel growing the socket's buffers):
	// a WaitRoom that answers before it sleeps must then have found room,
	// and the refusal is set up again (pubsub's heldWait does the same).
	var done chan error
	for try := 1; ; try++ {
		done = make(chan error, 1)
		slept := pub.Stats().RoomSleeps
		go func() { done <- pub.WaitRoom(ctx, 1) }()
		var answered bool
		var early error
		require.Eventually(t, func() bool {
			select {
			case early = <-done:
				answered = true
				return true
			default:
				return pub.Stats().RoomSleeps > slept
			}
		}, waitFor, time.Millisecond, "WaitRoom to sleep or answer")
		if !answered {
			break
		}
		require.NoError(t, early)
		require.Equal(t, pubsub.OK, pub.PublishZeroCopy(1, 0, data, key), "WaitRoom answered without room")
		key++
		require.Less(t, try, 5, "the refusal never stood: WaitRoom found room %d times", try)
		refuse()
	}
	release()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitFor):
		require.FailNow(t, "WaitRoom not woken by the publishes completing")
	}

	got := gatherUnlabelled(t, promstats.New(pmgr))
	st := pub.Stats()
	assert.Equal(t, float64(st.RoomSleeps), got["netio_pubsub_room_sleeps_total"])
	assert.Equal(t, float64(st.RoomWakes), got["netio_pubsub_room_wakes_total"])
	assert.Equal(t, float64(st.RoomTickWakes), got["netio_pubsub_room_tick_wakes_total"])
	assert.GreaterOrEqual(t, got["netio_pubsub_room_sleeps_total"], 1.0, "the call slept")
	assert.Positive(t, got["netio_pubsub_room_wakes_total"]+got["netio_pubsub_room_tick_wakes_total"], "woken")
}
