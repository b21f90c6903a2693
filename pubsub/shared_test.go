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

// sharedConfig is a Shared-mode publisher of tags with policy, whose
// buffers wait flush before they are posted.
func sharedConfig(tags []uint64, policy pubsub.Policy, flush time.Duration) pubsub.PublisherConfig {
	return pubsub.PublisherConfig{Tags: tags, Mode: pubsub.Shared, Policy: policy, FlushInterval: flush,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 32}, MaxInFlight: 128}
}

// checkInOrder asserts that c got exactly first..first+n-1 of tag, in
// order, and reported no gap of it.
func checkInOrder(t *testing.T, c *collector, tag, first, n uint64) {
	t.Helper()
	want := make([]uint64, 0, n)
	for s := first; s < first+n; s++ {
		want = append(want, s)
	}
	assert.Equal(t, want, c.received(tag), "tag %d", tag)
	for _, g := range c.gapList() {
		assert.NotEqual(t, tag, g.Tag, "tag %d: gap %+v", tag, g)
	}
}

// TestSharedMixedTagSets: subscribers with overlapping tag sets each get
// exactly the messages of their tags, in order, without gaps, from
// buffers encoded once per set of subscribers: the publisher sends more
// buffers than it fills.
func TestSharedMixedTagSets(t *testing.T) {
	const perTag, size = 3000, 64
	tagList := []uint64{1, 2, 3, 4, 5, 6}
	sets := [][]uint64{{1, 2, 3}, {2, 3, 4}, {1, 2, 3, 4, 5, 6}, {5}}
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			p := newPublisher(t, mgr, sharedConfig(tagList, pubsub.Block, 0))
			cols := make([]*collector, len(sets))
			subs := make([]*pubsub.Subscriber, len(sets))
			for i, set := range sets {
				cols[i] = newCollector()
				subs[i] = newSubscriber(t, mgr, cols[i].config(p.Addr()))
				require.NoError(t, subs[i].Subscribe(ctxT(t, 10*time.Second), set...))
			}
			buf := make([]byte, size)
			deadline := time.Now().Add(30 * time.Second)
			for seq := range uint64(perTag) {
				for _, tag := range tagList {
					require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq, deadline))
				}
			}
			for i, set := range sets {
				want := int64(len(set) * perTag)
				waitFor(t, 20*time.Second, func() bool { return cols[i].count.Load() == want }, "subscriber %d: %d messages", i, want)
				for _, tag := range set {
					checkInOrder(t, cols[i], tag, 0, perTag)
				}
				assert.Empty(t, cols[i].problems())
				ss := subs[i].Stats()
				assert.Zero(t, ss.Malformed+ss.BadRecords+ss.Unsolicited+ss.OutOfSequence, "subscriber %d: %+v", i, ss)
			}
			for _, tag := range tagList {
				var n uint64
				for _, set := range sets {
					if slices.Contains(set, tag) {
						n++
					}
				}
				st, _ := p.TagStats(tag)
				assert.Equal(t, n*perTag, st.Delivered, "tag %d", tag)
				assert.Zero(t, st.Dropped+st.Failed, "tag %d", tag)
			}
			// Four groups ({0,2}: 1; {0,1,2}: 2, 3; {1,2}: 4; {2,3}: 5; {2}: 6)
			// of two or three subscribers but one: well over one send per
			// buffer filled.
			ps := p.Stats()
			assert.Greater(t, ps.SharedSends, ps.SharedBuffers*3/2, "%+v", ps)
			waitFor(t, 10*time.Second, func() bool { return p.Stats().SharedFree == 128 }, "every buffer back")
		})
	}
}

// TestSharedStalledBlock: with Block, a subscriber that stalls makes
// Publish answer NoResources (nothing is taken, from anyone) until it
// reads again; then both subscribers get every message, without gaps.
func TestSharedStalledBlock(t *testing.T) {
	const tags, size, total = 2, 1024, 6000
	tagList := []uint64{7, 8}
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, sharedConfig(tagList, pubsub.Block, 0))
	cols := []*collector{newCollector(), newCollector()}
	for _, c := range cols {
		cfg := c.config(p.Addr())
		cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 8}
		s := newSubscriber(t, mgr, cfg)
		require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), tagList...))
	}
	var stalled atomic.Bool
	cols[0].stall = func() {
		if cols[0].count.Load() == 100 && stalled.CompareAndSwap(false, true) {
			time.Sleep(time.Second)
		}
	}
	buf := make([]byte, size)
	deadline := time.Now().Add(60 * time.Second)
	for seq := range uint64(total) {
		for _, tag := range tagList {
			require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq, deadline))
		}
	}
	require.True(t, stalled.Load())
	var refused uint64
	for _, tag := range tagList {
		st, _ := p.TagStats(tag)
		refused += st.Refused
		assert.Zero(t, st.Dropped+st.Failed)
	}
	assert.NotZero(t, refused, "the stalled subscriber never held Publish back")
	for i, c := range cols {
		waitFor(t, 20*time.Second, func() bool { return c.count.Load() == tags*total }, "subscriber %d: everything", i)
		for _, tag := range tagList {
			checkInOrder(t, c, tag, 0, total)
		}
		assert.Empty(t, c.problems())
	}
	assert.Zero(t, p.Stats().LostPending)
}

// TestSharedUnsubscribeInFlight: a tag unsubscribed (and subscribed
// again) while messages of it wait in a buffer shared with another
// subscriber: the buffer goes to both first, so each gets what was
// published while it was subscribed, in order, without gaps, and after
// resubscribing counts afresh. A subscriber that goes away with a buffer
// in flight changes nothing for the other, and every buffer comes back.
func TestSharedUnsubscribeInFlight(t *testing.T) {
	const size = 64
	tagList := []uint64{1, 2}
	for _, policy := range []pubsub.Policy{pubsub.Block, pubsub.Drop} {
		t.Run(policy.String(), func(t *testing.T) {
			mgr := openDomain(t, "tcp")
			// Buffers wait a second: what is published below sits in them.
			p := newPublisher(t, mgr, sharedConfig(tagList, policy, time.Second))
			a, b := newCollector(), newCollector()
			subA := newSubscriber(t, mgr, a.config(p.Addr()))
			subB, err := pubsub.NewSubscriber(mgr, b.config(p.Addr()))
			require.NoError(t, err)
			defer func() { assert.NoError(t, subB.Close()) }()
			require.NoError(t, subA.Subscribe(ctxT(t, 10*time.Second), tagList...))
			require.NoError(t, subB.Subscribe(ctxT(t, 10*time.Second), tagList...))

			buf := make([]byte, size)
			deadline := time.Now().Add(30 * time.Second)
			var seq [3]uint64
			publish := func(n int) {
				for range n {
					for _, tag := range tagList {
						require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq[tag], deadline))
						seq[tag]++
					}
				}
			}
			publish(100)
			require.Zero(t, p.Stats().SharedBuffers, "the buffer was posted before the test could unsubscribe")
			require.NoError(t, subB.Unsubscribe(ctxT(t, 10*time.Second), 1))
			publish(100) // tag 1 to A only, tag 2 to both
			require.NoError(t, subB.Subscribe(ctxT(t, 10*time.Second), 1))
			publish(100)
			// B gets the buffer that held tag 1 when it unsubscribed; it
			// takes those messages until its unsubscribe is under way (the
			// poller may be decoding that buffer when it starts), and
			// counts the rest as unsolicited.
			waitFor(t, 10*time.Second, func() bool {
				return a.count.Load() == 600 && b.count.Load()+int64(subB.Stats().Unsolicited) == 500
			}, "A to get 600 and B 500")
			checkInOrder(t, a, 1, 0, 300)
			checkInOrder(t, a, 2, 0, 300)
			checkInOrder(t, b, 2, 0, 300)
			unsolicited := subB.Stats().Unsolicited
			require.LessOrEqual(t, unsolicited, uint64(100), "only the buffer in flight at the unsubscribe is unsolicited")
			taken := 100 - unsolicited
			var want []uint64
			for s := range taken {
				want = append(want, s)
			}
			for s := uint64(200); s < 300; s++ {
				want = append(want, s)
			}
			assert.Equal(t, want, b.received(1), "B: a prefix of tag 1's first buffer, then tag 1 counted afresh after subscribing again")
			assert.Empty(t, b.gapList())

			// B goes away with a buffer of both tags waiting: A still gets
			// everything, and every buffer comes back.
			publish(100)
			require.NoError(t, subB.Close())
			publish(100)
			waitFor(t, 10*time.Second, func() bool { return a.count.Load() == 1000 }, "A to get 1000")
			checkInOrder(t, a, 1, 0, 500)
			checkInOrder(t, a, 2, 0, 500)
			assert.Empty(t, a.problems())
			assert.Empty(t, b.problems())
			waitFor(t, 10*time.Second, func() bool { return p.Stats().SharedFree == 128 }, "every buffer back: %+v", p.Stats())
		})
	}
}

// TestSharedConfig: Shared mode needs room for every subscriber's
// buffers in flight and leaves room for each send's header; the
// zero-copy call is refused in it.
func TestSharedConfig(t *testing.T) {
	mgr := openDomain(t, "tcp")
	_, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1}, Mode: pubsub.Shared,
		Send: netio.BufferedSendParams{BufferCount: 64}, MaxInFlight: 100})
	require.ErrorIs(t, err, netio.ErrInvalidArgument)
	p := newPublisher(t, mgr, sharedConfig([]uint64{1}, pubsub.Block, 0))
	assert.Less(t, p.MaxMessageSize(), 64<<10-300, "room for the START records of a send's header")
	big := make([]byte, p.MaxMessageSize()+1)
	assert.Equal(t, pubsub.InvalidArgument, p.Publish(1, big))
	assert.Equal(t, pubsub.NoSubscriptions, p.Publish(1, big[:p.MaxMessageSize()]))
	assert.Equal(t, pubsub.InvalidArgument, p.PublishZeroCopy(1, 0, big[:8], 1))
	assert.Equal(t, 128, p.Stats().SharedFree)
}

// TestPublisherFlush: Flush sends what waits in partly filled buffers at
// once, long before FlushInterval, and the publisher's counters then
// include it.
func TestPublisherFlush(t *testing.T) {
	for _, mode := range []pubsub.Mode{pubsub.Buffered, pubsub.Shared} {
		t.Run(fmt.Sprintf("mode%d", mode), func(t *testing.T) {
			mgr := openDomain(t, "tcp")
			cfg := sharedConfig([]uint64{1}, pubsub.Block, time.Minute)
			cfg.Mode = mode
			p := newPublisher(t, mgr, cfg)
			c := newCollector()
			sub := newSubscriber(t, mgr, c.config(p.Addr()))
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
			buf := make([]byte, 64)
			for seq := range uint64(10) {
				require.Equal(t, pubsub.OK, p.Publish(1, payload(buf, 1, seq)))
			}
			p.Flush()
			st, _ := p.TagStats(1)
			assert.Equal(t, uint64(10), st.Delivered)
			waitFor(t, 10*time.Second, func() bool { return c.count.Load() == 10 }, "the 10 messages, well before the minute")
			checkInOrder(t, c, 1, 0, 10)
		})
	}
}

// TestSharedIdleSleeps: the tick that posts partly filled buffers runs
// only while a buffer is being filled: not before the first message, and
// not after FlushInterval posted it. The counts are exact: a round is
// counted before it posts, so the delivered message implies its round is
// counted, and the round that posted the last buffer stops the ticker,
// which then delivers no more ticks.
func TestSharedIdleSleeps(t *testing.T) {
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, sharedConfig([]uint64{1}, pubsub.Drop, time.Millisecond))
	c := newCollector()
	sub := newSubscriber(t, mgr, c.config(p.Addr()))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
	time.Sleep(50 * time.Millisecond) // 100 ticks of 500 µs if it ran idle
	assert.Zero(t, p.Stats().SharedFlushes, "flush ticks with nothing to post")
	require.Equal(t, pubsub.OK, p.Publish(1, payload(make([]byte, 64), 1, 0)))
	waitFor(t, 10*time.Second, func() bool { return c.count.Load() == 1 }, "the message, posted by the tick")
	n := p.Stats().SharedFlushes
	assert.NotZero(t, n, "the tick posted the buffer")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, n, p.Stats().SharedFlushes, "flush ticks after the buffer was posted")
	checkInOrder(t, c, 1, 0, 1)
}
