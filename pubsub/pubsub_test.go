package pubsub_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// TestDeliveryBlock: every message published after Subscribe returned
// arrives, once, in per-tag order, with its sequence number, and nothing
// is lost with Block, in the copying modes.
func TestDeliveryBlock(t *testing.T) {
	const tags, perTag, size = 8, 2000, 64
	for _, prov := range providers {
		for _, mode := range []pubsub.Mode{pubsub.Buffered, pubsub.Immediate, pubsub.Shared} {
			t.Run(fmt.Sprintf("%s/mode%d", prov, mode), func(t *testing.T) {
				mgr := openDomain(t, prov)
				var tagList []uint64
				for i := range tags {
					tagList = append(tagList, uint64(100+i))
				}
				p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: tagList, Mode: mode})
				col := newCollector()
				sub := newSubscriber(t, mgr, col.config(p.Addr()))
				require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tagList...))
				assert.Equal(t, tagList, sub.Subscribed())

				buf := make([]byte, size)
				deadline := time.Now().Add(30 * time.Second)
				for seq := range uint64(perTag) {
					for _, tag := range tagList {
						require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq, deadline), "tag %d seq %d %+v", tag, seq, p.Subscribers())
					}
				}
				waitFor(t, 20*time.Second, func() bool { return col.count.Load() == tags*perTag }, "%d messages", tags*perTag)
				assert.Empty(t, col.problems())
				for _, tag := range tagList {
					got := col.received(tag)
					require.Len(t, got, perTag)
					for i, s := range got {
						if !assert.Equal(t, uint64(i), s, "tag %d position %d", tag, i) {
							break
						}
					}
					st, ok := sub.TagStats(tag)
					require.True(t, ok)
					assert.Equal(t, uint64(perTag), st.Messages)
					assert.Zero(t, st.Gaps)
					assert.Zero(t, st.Missed)
					pst, ok := p.TagStats(tag)
					require.True(t, ok)
					assert.Equal(t, uint64(perTag), pst.Published)
					assert.Zero(t, pst.Dropped)
				}
				assert.Empty(t, col.gapList())
				ss := sub.Stats()
				assert.Zero(t, ss.Malformed+ss.BadRecords+ss.Unsolicited+ss.StrayConns+ss.OutOfSequence)
				// Immediate sends one message per buffer (its records may
				// add buffers); the others coalesce.
				if mode == pubsub.Immediate {
					assert.GreaterOrEqual(t, ss.Buffers, uint64(tags*perTag), "Immediate: a buffer per message")
				} else {
					assert.Less(t, ss.Buffers, uint64(tags*perTag), "mode %d coalesces", mode)
				}
			})
		}
	}
}
