package pubsub_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// TestResubscribeNoFalseGap: a tag unsubscribed and subscribed again on
// the same connection, while it is published, starts a new count: the
// SYNC records of its earlier subscription still in flight do not make
// the messages published between the two subscriptions look missed. With
// Block nothing is ever dropped, so every gap would be a false one.
func TestResubscribeNoFalseGap(t *testing.T) {
	const tag, keep, rounds = 5, 1, 300
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{keep, tag}, Policy: pubsub.Block})
	col := newCollector()
	sub := newSubscriber(t, mgr, col.config(p.Addr()))
	// keep holds the session, so every subscription of tag is on one
	// connection.
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), keep))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // publish tag as fast as it is taken
		defer wg.Done()
		buf := make([]byte, 64)
		for seq := uint64(0); ; {
			select {
			case <-stop:
				return
			default:
			}
			switch p.Publish(tag, payload(buf, tag, seq)) {
			case pubsub.NoResources:
				time.Sleep(20 * time.Microsecond)
			default:
				seq++
			}
		}
	}()
	for range rounds {
		require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag))
		time.Sleep(100 * time.Microsecond)
		require.NoError(t, sub.Unsubscribe(ctxT(t, 10*time.Second), tag))
	}
	close(stop)
	wg.Wait()
	pst, _ := p.TagStats(tag)
	require.Zero(t, pst.Dropped, "Block drops nothing")
	st := sub.Stats()
	assert.Zero(t, st.Gaps, "gaps reported for messages published while the tag was not subscribed: %+v", col.gapList())
	assert.Zero(t, st.OutOfSequence)
	assert.Empty(t, col.problems())
}

// TestLostBeforeFirstRecord: a subscriber whose publisher goes away right
// after acknowledging its subscription, before any record of the tag
// reached it, counts from the ack's number: when the restarted publisher
// continues at 100, the 100 numbers are reported missed, not skipped.
func TestLostBeforeFirstRecord(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			const tag, skipped = 3, 100
			mgr := openDomain(t, prov)
			p1, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{tag}})
			require.NoError(t, err)
			addr := p1.Addr()
			col := newCollector()
			sub := newSubscriber(t, mgr, col.config(addr))
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag))
			require.NoError(t, p1.Close()) // at once: no record of tag sent yet, or lost with the connection
			p2, err := pubsub.NewPublisher(mgr, addr, pubsub.PublisherConfig{Tags: []uint64{tag},
				FirstSequence: func(uint64) uint64 { return skipped }})
			require.NoError(t, err)
			defer func() { assert.NoError(t, p2.Close()) }()
			waitFor(t, 10*time.Second, func() bool { return col.restored.Load() > 0 }, "OnRestored")
			buf := make([]byte, 64)
			require.Equal(t, pubsub.OK, publishAll(t, p2, tag, buf, skipped, time.Now().Add(10*time.Second)))
			waitFor(t, 10*time.Second, func() bool { return col.count.Load() == 1 }, "the message after the restart")
			checkAccounted(t, col, tag, skipped+1)
			st, _ := sub.TagStats(tag)
			assert.Equal(t, uint64(skipped), st.Missed)
		})
	}
}
