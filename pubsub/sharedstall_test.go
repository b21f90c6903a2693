package pubsub_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

// stallUntil makes c's subscriber stop reading at its first message
// until release is closed (or a minute passed: the test stops by itself).
func stallUntil(c *collector, release <-chan struct{}) {
	c.stall = func() {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	}
}

// stalledTwo starts three subscribers of p, subscriber i on tag i+1;
// the first two stop reading at their first message until release is
// called (at cleanup at the latest).
func stalledTwo(t *testing.T, mgr *domain.Manager, p *pubsub.Publisher) ([]*collector, []*pubsub.Subscriber, func()) {
	ch := make(chan struct{})
	release := sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	cols := []*collector{newCollector(), newCollector(), newCollector()}
	subs := make([]*pubsub.Subscriber, 3)
	for i, c := range cols {
		if i < 2 {
			stallUntil(c, ch)
		}
		cfg := c.config(p.Addr())
		cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 4}
		subs[i] = newSubscriber(t, mgr, cfg)
		require.NoError(t, subs[i].Subscribe(ctxT(t, 10*time.Second), uint64(i+1)))
	}
	t.Cleanup(release) // again: before the subscribers' cleanup closes them
	return cols, subs, release
}

// smallShared is a Shared-mode publisher with the smallest pool allowed:
// 8 buffers, 4 in flight per subscriber.
func smallShared(tags []uint64, policy pubsub.Policy) pubsub.PublisherConfig {
	return pubsub.PublisherConfig{Tags: tags, Mode: pubsub.Shared, Policy: policy, FlushInterval: time.Minute,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 4}, MaxInFlight: 8}
}

// subscriberOf returns what p says of its subscriber of exactly tags.
func subscriberOf(p *pubsub.Publisher, tags ...uint64) (pubsub.SubscriberInfo, bool) {
	for _, si := range p.Subscribers() {
		if slices.Equal(si.Tags, tags) {
			return si, true
		}
	}
	return pubsub.SubscriberInfo{}, false
}

// inFlight returns the shared buffers held by the sends of the subscriber
// of exactly tags.
func inFlight(p *pubsub.Publisher, tags ...uint64) int {
	if si, ok := subscriberOf(p, tags...); ok {
		return si.InFlight
	}
	return -1
}

// TestSharedStalledDropKeepsPool: two Drop subscribers, each alone on its
// tag, stop reading; they may not take the shared pool from a third, on a
// tag of its own, which gets every message without a gap, while the
// stalled ones lose copies; once they read again, the gaps they report
// are exactly the publisher's drops.
func TestSharedStalledDropKeepsPool(t *testing.T) {
	const rounds, size = 600, 48 << 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, smallShared([]uint64{1, 2, 3}, pubsub.Drop))
	cols, subs, release := stalledTwo(t, mgr, p)
	buf := make([]byte, size)
	round := func(seq uint64) {
		for tag := uint64(1); tag <= 3; tag++ {
			require.Equal(t, pubsub.OK, p.Publish(tag, payload(buf, tag, seq)), "tag %d seq %d: %+v", tag, seq, p.Stats())
		}
		p.Flush()
		// The healthy subscriber reads it, and its send completed.
		waitFor(t, 10*time.Second, func() bool { return cols[2].count.Load() == int64(seq+1) && inFlight(p, 3) == 0 },
			"healthy subscriber: seq %d", seq)
	}
	for seq := range uint64(rounds) {
		round(seq)
	}
	ps := p.Stats()
	assert.GreaterOrEqual(t, ps.SharedFree, 4, "stalled Drop subscribers took the reserve: %+v", ps)
	for _, tag := range []uint64{1, 2} {
		st, _ := p.TagStats(tag)
		require.NotZero(t, st.Dropped, "tag %d: the stalled subscriber lost nothing: the test did not stall it", tag)
	}
	release()
	waitFor(t, 20*time.Second, func() bool { return inFlight(p, 1) == 0 && inFlight(p, 2) == 0 }, "stalled sends to complete")
	round(rounds) // the SYNC records that report the last gaps
	const published = rounds + 1
	for i, tag := range []uint64{1, 2} {
		waitFor(t, 20*time.Second, func() bool {
			st, _ := subs[i].TagStats(tag)
			return st.Messages+st.Missed == published
		}, "subscriber %d to account for %d messages", i, published)
		missed := checkAccounted(t, cols[i], tag, published)
		st, _ := p.TagStats(tag)
		assert.Equal(t, st.Dropped, missed, "tag %d: the publisher's drops are the subscriber's gaps", tag)
		assert.Equal(t, uint64(published), st.Delivered+st.Dropped, "tag %d: %+v", tag, st)
		assert.Empty(t, cols[i].problems())
	}
	checkInOrder(t, cols[2], 3, 0, published)
	assert.Empty(t, cols[2].problems())
	st, _ := p.TagStats(3)
	assert.Equal(t, uint64(published), st.Delivered)
	assert.Zero(t, st.Dropped+st.Failed)
	waitFor(t, 10*time.Second, func() bool { return p.Stats().SharedFree == 8 }, "every buffer back: %+v", p.Stats())
}

// TestSharedStalledBlockLost: a Block subscriber that stopped reading has
// a post queued when the publisher closes: its messages count as failed,
// not delivered, and LostPending counts the one buffer.
func TestSharedStalledBlockLost(t *testing.T) {
	const size = 48 << 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, smallShared([]uint64{1}, pubsub.Block))
	release := make(chan struct{})
	defer close(release)
	c := newCollector()
	stallUntil(c, release)
	cfg := c.config(p.Addr())
	cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 4}
	sub := newSubscriber(t, mgr, cfg)
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
	buf := make([]byte, size)
	var published uint64
	deadline := time.Now().Add(30 * time.Second)
	// One message a buffer until one stays queued (the subscriber's
	// connection is full): Publish refuses then, for good.
	publish := func() bool {
		st := p.Publish(1, payload(buf, 1, published))
		if st == pubsub.NoResources {
			return false
		}
		require.Equal(t, pubsub.OK, st)
		published++
		p.Flush()
		return true
	}
	require.True(t, testpattern.UntilRefused(deadline, 200*time.Millisecond, publish, nil),
		"never queued for good after %d messages", published)
	require.True(t, p.Subscribers()[0].Pending)
	st, _ := p.TagStats(1)
	assert.Equal(t, published-1, st.Delivered, "the queued message counted as delivered: %+v", st)
	require.NoError(t, p.Close())
	st, _ = p.TagStats(1)
	assert.Equal(t, published-1, st.Delivered, "%+v", st)
	assert.Equal(t, uint64(1), st.Failed, "%+v", st)
	assert.Equal(t, uint64(1), p.Stats().LostPending)
}

// fillPool publishes messages of buf's size on tags 1 and 2 of p (one
// each per round, a round a millisecond, the pool posted each time) until
// full says the pool is as the test wants it (30 s at most), and returns
// how many of each were taken.
func fillPool(t *testing.T, p *pubsub.Publisher, buf []byte, full func() bool) [2]uint64 {
	t.Helper()
	var seq [2]uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "the pool never filled as wanted: %+v", p.Stats())
		for i, tag := range []uint64{1, 2} {
			if p.Publish(tag, payload(buf, tag, seq[i])) == pubsub.OK {
				seq[i]++
			}
		}
		p.Flush()
		if full() {
			return seq
		}
		time.Sleep(time.Millisecond)
	}
}

// poolEmptyFor returns a condition for fillPool: p's shared pool was
// empty at every call over the last d (a stalled subscriber holds it for
// good, not for a completion's time).
func poolEmptyFor(p *pubsub.Publisher, d time.Duration) func() bool {
	var emptySince time.Time
	return func() bool {
		if p.Stats().SharedFree != 0 {
			emptySince = time.Time{}
		} else if emptySince.IsZero() {
			emptySince = time.Now()
		}
		return !emptySince.IsZero() && time.Since(emptySince) >= d
	}
}

// TestSharedStalledBlockOtherTags: Block subscribers that stopped reading
// may empty the shared pool; then Publish on a tag they do not subscribe
// answers NoResources and takes nothing (no sequence number used), and
// once they read again everyone gets everything, in order, without gaps.
func TestSharedStalledBlockOtherTags(t *testing.T) {
	const size = 48 << 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, smallShared([]uint64{1, 2, 3}, pubsub.Block))
	cols, _, release := stalledTwo(t, mgr, p)
	buf := make([]byte, size)
	seq := fillPool(t, p, buf, poolEmptyFor(p, 200*time.Millisecond))
	assert.Equal(t, pubsub.NoResources, p.Publish(3, payload(buf, 3, 0)))
	st, _ := p.TagStats(3)
	assert.Equal(t, pubsub.PublisherTagStats{Refused: 1, Subscribers: 1}, st, "nothing taken")
	release()
	for s := range uint64(20) {
		require.Equal(t, pubsub.OK, publishAll(t, p, 3, buf, s, time.Now().Add(20*time.Second)))
	}
	p.Flush()
	waitFor(t, 20*time.Second, func() bool { return cols[2].count.Load() == 20 }, "tag 3: 20 messages")
	checkInOrder(t, cols[2], 3, 0, 20)
	for i, tag := range []uint64{1, 2} {
		waitFor(t, 20*time.Second, func() bool { return cols[i].count.Load() == int64(seq[i]) }, "tag %d: %d messages", tag, seq[i])
		checkInOrder(t, cols[i], tag, 0, seq[i])
		assert.Empty(t, cols[i].problems())
	}
	assert.Zero(t, p.Stats().LostPending)
}
