package pubsub_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// checkAccounted asserts that what c received of tag and the gaps it
// reported cover 0..n-1 exactly: every sequence number either arrived (in
// order, once) or is inside exactly one gap. It returns how many were
// missed.
func checkAccounted(t *testing.T, c *collector, tag, n uint64) uint64 {
	t.Helper()
	got := c.received(tag)
	seen := make([]int, n)
	for i, s := range got {
		if !assert.Less(t, s, n, "tag %d: sequence number out of range", tag) {
			return 0
		}
		if i > 0 && !assert.Greater(t, s, got[i-1], "tag %d: out of order at %d", tag, i) {
			return 0
		}
		seen[s]++
	}
	var missed uint64
	for _, g := range c.gapList() {
		if g.Tag != tag {
			continue
		}
		assert.False(t, g.Reset, "tag %d: unexpected reset", tag)
		missed += g.Count
		for s := g.First; s < g.First+g.Count && s < n; s++ {
			seen[s]++
		}
	}
	for s, k := range seen {
		if !assert.Equal(t, 1, k, "tag %d seq %d: received or reported missing %d times, want exactly once", tag, s, k) {
			break
		}
	}
	return missed
}

// TestDropStalledSubscriber: with one subscriber stalled for 2 s and the
// Drop policy, the other subscribers get every message and the stalled
// one reports, per tag, exactly the sequence numbers it did not get; in
// Shared mode too, where the stalled one loses whole shared buffers that
// the others still get.
func TestDropStalledSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	for _, prov := range providers {
		for _, mode := range []pubsub.Mode{pubsub.Buffered, pubsub.Shared} {
			t.Run(fmt.Sprintf("%s/mode%d", prov, mode), func(t *testing.T) { dropStalled(t, prov, mode) })
		}
	}
}

func dropStalled(t *testing.T, prov string, mode pubsub.Mode) {
	const tags, size = 4, 4 << 10
	const stallFor = 2 * time.Second
	mgr := openDomain(t, prov)
	tagList := []uint64{1, 2, 3, 4}
	// 2 MiB in flight per subscriber, 4 MiB posted at each: a
	// subscriber that is not stalled rides out the pauses a loaded
	// machine gives its poller (or sockets' progress thread) without
	// a drop; fewer receive buffers than send buffers livelock
	// sockets under load (tests/netns).
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: tagList, Policy: pubsub.Drop, Mode: mode,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 32}})
	var cols []*collector
	var subs []*pubsub.Subscriber
	for range 3 {
		c := newCollector()
		cfg := c.config(p.Addr())
		cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 64}
		s := newSubscriber(t, mgr, cfg)
		require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), tagList...))
		cols, subs = append(cols, c), append(subs, s)
	}
	// Subscriber 0 stalls its poller for stallFor once the stall
	// begins: the only test that blocks a callback, on purpose.
	var stallAt atomic.Int64
	var stalled atomic.Bool
	cols[0].stall = func() {
		if at := stallAt.Load(); at != 0 && time.Now().UnixNano() >= at && stalled.CompareAndSwap(false, true) {
			time.Sleep(stallFor)
		}
	}
	buf := make([]byte, size)
	var published uint64
	start := time.Now()
	stallAt.Store(start.Add(300 * time.Millisecond).UnixNano())
	// On tcp about 16 MB/s for 3.5 s: the fast subscribers keep up,
	// the stalled one's socket buffers overflow. sockets is slower
	// (docs/providers.md): a quarter of that.
	pause := time.Millisecond
	if prov == "sockets" {
		pause = 4 * time.Millisecond
	}
	for time.Since(start) < 3500*time.Millisecond {
		for _, tag := range tagList {
			st := p.Publish(tag, payload(buf, tag, published))
			require.Contains(t, []pubsub.Status{pubsub.OK, pubsub.PartiallyFailed}, st,
				"seq %d: %+v", published, p.Subscribers())
		}
		published++
		time.Sleep(pause)
	}
	require.True(t, stalled.Load(), "the stall did not happen")
	for i, c := range cols {
		waitFor(t, 20*time.Second, func() bool {
			for _, tag := range tagList {
				st, _ := subs[i].TagStats(tag)
				if st.Messages+st.Missed != published {
					return false
				}
			}
			return true
		}, "subscriber %d to account for %d messages per tag", i, published)
		var missed uint64
		for _, tag := range tagList {
			missed += checkAccounted(t, c, tag, published)
		}
		assert.Empty(t, c.problems())
		if i == 0 {
			t.Logf("%s: stalled subscriber missed %d of %d messages", prov, missed, published*tags)
			if prov == "tcp" { // sockets stages what a stalled peer leaves without bound
				assert.NotZero(t, missed, "the stalled subscriber lost nothing: the test did not overflow it")
			}
			var dropped uint64
			for _, tag := range tagList {
				st, _ := p.TagStats(tag)
				dropped += st.Dropped
			}
			assert.Equal(t, dropped, missed, "the publisher's drops are the stalled subscriber's gaps")
		} else {
			assert.Zero(t, missed, "subscriber %d is not stalled and must get everything", i)
		}
	}
}

// TestPublisherRestart: a publisher that goes away and comes back at the
// same address, continuing its numbering, is found again by its
// subscriber, which resubscribes by itself and reports as gaps exactly the
// sequence numbers it did not get.
func TestPublisherRestart(t *testing.T) {
	const tags, before, down, after, size = 4, 500, 300, 500, 256
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			tagList := []uint64{10, 11, 12, 13}
			p1, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: tagList})
			require.NoError(t, err)
			addr := p1.Addr()
			col := newCollector()
			sub := newSubscriber(t, mgr, col.config(addr))
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tagList...))

			buf := make([]byte, size)
			deadline := time.Now().Add(30 * time.Second)
			for seq := range uint64(before) {
				for _, tag := range tagList {
					require.Equal(t, pubsub.OK, publishAll(t, p1, tag, buf, seq, deadline))
				}
			}
			require.NoError(t, p1.Close())
			waitFor(t, 10*time.Second, func() bool { return col.lost.Load() > 0 }, "OnLost")

			// The restarted publisher continues the numbering: the
			// messages of the outage (before..before+down-1) are missed.
			first := uint64(before + down)
			p2, err := pubsub.NewPublisher(mgr, addr, pubsub.PublisherConfig{Tags: tagList,
				FirstSequence: func(uint64) uint64 { return first }})
			require.NoError(t, err)
			defer func() { assert.NoError(t, p2.Close()) }()
			waitFor(t, 10*time.Second, func() bool { return col.restored.Load() > 0 }, "OnRestored")
			assert.Equal(t, tagList, sub.Subscribed())
			for seq := first; seq < first+after; seq++ {
				for _, tag := range tagList {
					require.Equal(t, pubsub.OK, publishAll(t, p2, tag, buf, seq, deadline))
				}
			}
			total := first + after
			waitFor(t, 10*time.Second, func() bool {
				for _, tag := range tagList {
					if st, _ := sub.TagStats(tag); st.NextSeq != total {
						return false
					}
				}
				return true
			}, "every tag to reach %d", total)
			for _, tag := range tagList {
				missed := checkAccounted(t, col, tag, total)
				assert.GreaterOrEqual(t, missed, uint64(down), "tag %d", tag)
				got := col.received(tag)
				assert.True(t, slices.Contains(got, first), "tag %d: the first message after the restart", tag)
			}
			assert.Empty(t, col.problems())
			assert.GreaterOrEqual(t, sub.Stats().Reconnects, uint64(1))
		})
	}
}
