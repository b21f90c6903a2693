package pubsub_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// TestCloseLeavesNoFD: a publisher and a subscriber that exchanged
// messages, then closed, leave no file descriptor open (control
// connections, listeners, pollers' wait and wake descriptors, the
// providers' sockets); goroutines and registrations are checked by
// TestMain and openDomain.
func TestCloseLeavesNoFD(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			base := openFDs(t)
			p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1, 2}})
			require.NoError(t, err)
			col := newCollector()
			s, err := pubsub.NewSubscriber(mgr, col.config(p.Addr()))
			require.NoError(t, err)
			require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), 1, 2))
			buf := make([]byte, 64)
			deadline := time.Now().Add(10 * time.Second)
			for seq := range uint64(100) {
				require.Equal(t, pubsub.OK, publishAll(t, p, 1+seq%2, buf, seq/2, deadline))
			}
			waitFor(t, 10*time.Second, func() bool { return col.count.Load() == 100 }, "100 messages")
			assert.Greater(t, openFDs(t), base, "the pair holds descriptors while it runs")
			require.NoError(t, s.Close())
			require.NoError(t, p.Close())
			// A provider may close a socket a moment after the endpoint's
			// close returns (its progress thread).
			waitFor(t, 5*time.Second, func() bool { return openFDs(t) <= base }, "descriptors back to %d", base)
		})
	}
}

// TestSubscribersCountsEndedSubscriptions: a subscriber's Delivered in
// Publisher.Subscribers counts the copies of the subscriptions it ended
// too, as Dropped does, so that a report taken while a subscriber leaves
// (netio-perf publish's) does not read 0.
func TestSubscribersCountsEndedSubscriptions(t *testing.T) {
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1, 2}})
	col := newCollector()
	sub := newSubscriber(t, mgr, col.config(p.Addr()))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1, 2))
	buf := make([]byte, 64)
	deadline := time.Now().Add(10 * time.Second)
	for seq := range uint64(10) {
		for _, tag := range []uint64{1, 2} {
			require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq, deadline))
		}
	}
	waitFor(t, 10*time.Second, func() bool { return col.count.Load() == 20 }, "20 messages")
	require.NoError(t, sub.Unsubscribe(ctxT(t, 10*time.Second), 1))
	infos := p.Subscribers()
	require.Len(t, infos, 1)
	assert.Equal(t, []uint64{2}, infos[0].Tags)
	assert.Equal(t, uint64(20), infos[0].Delivered, "the ended subscription's 10 copies count")
}
