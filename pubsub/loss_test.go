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

// TestDropStalledSubscriber: with one Drop subscriber stalled until the
// publisher has dropped copies for it, a Block subscriber beside it gets
// every message, a Drop one beside it accounts for every message (got it
// or was told of it in a gap, as a loaded machine may pause its poller
// too), and each Drop subscriber's gaps are exactly the copies the
// publisher dropped for it; in Shared mode too, where a stalled
// subscriber loses whole shared buffers that the others still get.
func TestDropStalledSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	for _, prov := range providers {
		for _, mode := range []pubsub.Mode{pubsub.Buffered, pubsub.Shared} {
			t.Run(fmt.Sprintf("%s/mode%d", prov, mode), func(t *testing.T) {
				t.Parallel() // each has its own domain; most of a run is the stall and the publisher's pauses
				dropStalled(t, prov, mode)
			})
		}
	}
}

// stalledSubscribers are the three subscribers of dropStalled: the
// stalled one (Drop), a Block one and a Drop one that are not stalled.
var stalledSubscribers = []pubsub.Policy{pubsub.Drop, pubsub.Block, pubsub.Drop}

func dropStalled(t *testing.T, prov string, mode pubsub.Mode) {
	const tags, size = 4, 4 << 10
	mgr := openDomain(t, prov)
	tagList := []uint64{1, 2, 3, 4}
	// 2 MiB in flight per subscriber, 4 MiB posted at each; fewer
	// receive buffers than send buffers livelock sockets under load
	// (tests/netns).
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: tagList, Policy: pubsub.Drop, Mode: mode,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 32}})
	var cols []*collector
	var subs []*pubsub.Subscriber
	for _, policy := range stalledSubscribers {
		c := newCollector()
		cfg := c.config(p.Addr())
		cfg.Policy = policy
		cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 64}
		s := newSubscriber(t, mgr, cfg)
		require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), tagList...))
		cols, subs = append(cols, c), append(subs, s)
		infos := p.Subscribers()
		require.True(t, slices.ContainsFunc(infos, func(in pubsub.SubscriberInfo) bool { return in.Peer == s.DataAddr() }),
			"subscriber %s not among %+v", s.DataAddr(), infos)
	}
	st := stallFirst(cols[0])
	published := publishThroughStall(t, p, prov, subs[0].DataAddr(), tagList, size, st)
	infos := p.Subscribers()
	require.Len(t, infos, len(subs), "%+v", infos)
	var missedAll uint64
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
		missedAll += missed
		assert.Empty(t, c.problems())
		assert.Equal(t, droppedFor(infos, subs[i].DataAddr()), missed,
			"subscriber %d: the publisher's drops for it are its gaps", i)
		switch {
		case i == 0:
			t.Logf("%s: stalled subscriber missed %d of %d messages", prov, missed, published*tags)
			if prov == "tcp" { // sockets stages what a stalled peer leaves without bound
				assert.NotZero(t, missed, "the stalled subscriber lost nothing: the test did not overflow it")
			}
		case stalledSubscribers[i] == pubsub.Block:
			assert.Zero(t, missed, "subscriber %d (Block) must get everything", i)
		default:
			t.Logf("%s: Drop subscriber %d, not stalled, missed %d", prov, i, missed)
		}
	}
	var dropped uint64
	for _, tag := range tagList {
		st, _ := p.TagStats(tag)
		dropped += st.Dropped
	}
	assert.Equal(t, dropped, missedAll, "the publisher's drops are the subscribers' gaps")
}

// stall holds a subscriber's poller from its first message after begin
// is set until release is closed: the only test that blocks a callback,
// on purpose.
type stall struct {
	begin   atomic.Bool
	started atomic.Int64 // when the stall began (UnixNano), 0 before
	release chan struct{}
}

// stallFirst makes c's poller stall once, as st says.
func stallFirst(c *collector) *stall {
	st := &stall{release: make(chan struct{})}
	c.stall = func() {
		if st.begin.Load() && st.started.CompareAndSwap(0, time.Now().UnixNano()) {
			select {
			case <-st.release:
			case <-time.After(time.Minute): // never hang the test
			}
		}
	}
	return st
}

// publishThroughStall publishes 4 KiB messages of every tag, starts the
// stall of the subscriber at stalledAddr and keeps publishing until the
// publisher has dropped copies for it (on tcp; sockets stages what a
// stalled peer leaves without bound, so there 2 s of stall), releases it,
// publishes 1 s more, and returns how many messages of each tag it
// published. The pace is the Block subscriber's: a loaded machine slows
// the test down but cannot change what it checks.
func publishThroughStall(t *testing.T, p *pubsub.Publisher, prov, stalledAddr string, tagList []uint64, size int, st *stall) uint64 {
	const minStall, maxStall = 2 * time.Second, 30 * time.Second
	buf := make([]byte, size)
	deadline := time.Now().Add(2 * time.Minute)
	// About 16 MB/s on tcp at most; sockets is slower
	// (docs/providers.md): a quarter of that.
	pause := time.Millisecond
	if prov == "sockets" {
		pause = 4 * time.Millisecond
	}
	var published uint64
	var released time.Time
	for start := time.Now(); released.IsZero() || time.Since(released) < time.Second; published++ {
		for _, tag := range tagList {
			s := publishAll(t, p, tag, buf, published, deadline)
			require.Contains(t, []pubsub.Status{pubsub.OK, pubsub.PartiallyFailed}, s,
				"seq %d: %+v", published, p.Subscribers())
		}
		if time.Since(start) > 300*time.Millisecond {
			st.begin.Store(true)
		}
		if at := st.started.Load(); released.IsZero() && at != 0 {
			stalledFor := time.Since(time.Unix(0, at))
			enough := prov != "tcp" || droppedFor(p.Subscribers(), stalledAddr) > 0
			if stalledFor >= maxStall || (stalledFor >= minStall && enough) {
				close(st.release)
				released = time.Now()
			}
		}
		time.Sleep(pause)
	}
	return published
}

// droppedFor returns the copies dropped for the subscriber whose data
// address is addr.
func droppedFor(infos []pubsub.SubscriberInfo, addr string) uint64 {
	for _, in := range infos {
		if in.Peer == addr {
			return in.Dropped
		}
	}
	return 0
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
