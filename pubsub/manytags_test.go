package pubsub_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// TestManyLargeTags: 30,000 tags of 20 digits (FELIX's 64-bit link IDs)
// with 19-digit sequence numbers are subscribed in one Subscribe and
// unsubscribed in one Unsubscribe: every request and every ack fits in a
// control line (a single request for them all would not), and neither
// call takes time that grows with the square of the tags.
func TestManyLargeTags(t *testing.T) {
	const n = 30000
	mgr := openDomain(t, "tcp")
	tags := make([]uint64, n)
	for i := range tags {
		tags[i] = 1<<63 + uint64(i)
	}
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: tags,
		FirstSequence: func(uint64) uint64 { return 1 << 62 }})
	col := newCollector()
	sub := newSubscriber(t, mgr, col.config(p.Addr()))
	start := time.Now()
	require.NoError(t, sub.Subscribe(ctxT(t, 60*time.Second), tags...))
	t.Logf("subscribed %d tags in %v", n, time.Since(start))
	assert.Len(t, sub.Subscribed(), n)
	st, _ := p.TagStats(tags[n-1])
	assert.Equal(t, 1, st.Subscribers)

	buf := make([]byte, 64)
	require.Equal(t, pubsub.OK, publishAll(t, p, tags[n-1], buf, 1<<62, time.Now().Add(10*time.Second)))
	waitFor(t, 10*time.Second, func() bool { return col.count.Load() == 1 }, "the message")
	assert.Empty(t, col.problems())

	start = time.Now()
	require.NoError(t, sub.Unsubscribe(ctxT(t, 60*time.Second), tags...))
	t.Logf("unsubscribed %d tags in %v", n, time.Since(start))
	waitFor(t, 10*time.Second, func() bool { return p.Stats().Subscribers == 0 }, "the session to end")
	assert.Zero(t, p.Stats().Malformed)
}
