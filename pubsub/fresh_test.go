package pubsub_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// TestDropBeforeFirstSync: with the Drop policy, copies of a tag dropped
// after Subscribe returned but before the subscription's first SYNC record
// got through are reported as a gap, not taken for the subscription's
// start. The subscriber is stalled on another tag so that its
// connection is full when the new tag's first messages come. tcp only:
// sockets stages what a stalled peer leaves without bound, so nothing is
// ever dropped there (docs/providers.md).
func TestDropBeforeFirstSync(t *testing.T) {
	const busy, fresh, size = 1, 2, 4 << 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{busy, fresh}, Policy: pubsub.Drop,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 2}})
	col := newCollector()
	release := make(chan struct{})
	var once sync.Once
	unstall := func() { once.Do(func() { close(release) }) }
	col.stall = func() { <-release }
	cfg := col.config(p.Addr())
	cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 2}
	sub := newSubscriber(t, mgr, cfg)
	t.Cleanup(unstall) // runs before the subscriber's Close
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), busy))

	// Fill the stalled subscriber's connection, socket buffers included,
	// until copies are dropped for 20 ms in a row.
	buf := make([]byte, size)
	var busySeq uint64
	deadline := time.Now().Add(20 * time.Second)
	for failedInARow := 0; failedInARow < 20; busySeq++ {
		st := p.Publish(busy, payload(buf, busy, busySeq))
		require.Contains(t, []pubsub.Status{pubsub.OK, pubsub.Failed}, st)
		if st == pubsub.OK {
			failedInARow = 0
			continue
		}
		failedInARow++
		time.Sleep(time.Millisecond)
		require.True(t, time.Now().Before(deadline), "the connection never filled (%d messages)", busySeq)
	}
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), fresh))
	// The connection is still full: the new tag's first copy is dropped,
	// and with it the subscription's first SYNC record.
	require.Equal(t, pubsub.Failed, p.Publish(fresh, payload(buf, fresh, 0)))
	unstall()

	// The subscriber drains now; copies that still find the connection
	// full are dropped too, and must be reported as well.
	var freshSeq uint64 = 1
	for ; freshSeq < 100; freshSeq++ {
		st := p.Publish(fresh, payload(buf, fresh, freshSeq))
		require.Contains(t, []pubsub.Status{pubsub.OK, pubsub.Failed}, st, "seq %d", freshSeq)
		time.Sleep(100 * time.Microsecond)
	}
	waitFor(t, 20*time.Second, func() bool {
		st, _ := sub.TagStats(fresh)
		return st.NextSeq == freshSeq
	}, "tag %d to reach %d", fresh, freshSeq)
	missed := checkAccounted(t, col, fresh, freshSeq)
	pst, _ := p.TagStats(fresh)
	assert.Equal(t, pst.Dropped, missed, "the publisher's drops are the subscriber's gaps")
	assert.NotZero(t, missed, "the first copy was dropped")
	assert.Empty(t, col.problems())
}
