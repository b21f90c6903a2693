package pubsub_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/pubsub"
)

// v1Reader reads the data connection as a subscriber built to the first
// text of protocol version 1 did: it knows HELLO and SYNC records only,
// ignores any other kind, and counts a tag's messages from its SYNC.
type v1Reader struct {
	mu   sync.Mutex
	next map[uint64]uint64 // per tag: the number of its next message, once a SYNC told it
	seqs map[uint64][]uint64
	lost int // messages before any SYNC of their tag: discarded
}

func (r *v1Reader) onBuffer(_ string, buf []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := coalesce.NewDecoder(buf)
	for d.Next() {
		if d.Tag() == pubsub.ControlTag {
			if rec, err := pubsub.ParseRecord(d.Data()); err == nil && rec.Kind == pubsub.RecordSync {
				r.next[rec.A] = rec.B
			}
			continue
		}
		n, ok := r.next[d.Tag()]
		if !ok {
			r.lost++
			continue
		}
		r.seqs[d.Tag()] = append(r.seqs[d.Tag()], n)
		r.next[d.Tag()] = n + 1
	}
}

func (r *v1Reader) received(tag uint64) ([]uint64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint64(nil), r.seqs[tag]...), r.lost
}

// TestV1ReaderNumbersFromStart: the START record that opens a
// subscription is followed by a SYNC of the same number, so a reader
// that does not know START (it ignores unknown kinds, as the spec says)
// still numbers every message from the first, in every mode and policy,
// and again after the tag is unsubscribed and subscribed on the same
// connection.
func TestV1ReaderNumbersFromStart(t *testing.T) {
	const keep, tag = 1, 3
	modes := map[string]pubsub.Mode{"buffered": pubsub.Buffered, "immediate": pubsub.Immediate, "zerocopy": pubsub.ZeroCopy, "shared": pubsub.Shared}
	for name, mode := range modes {
		for _, policy := range []pubsub.Policy{pubsub.Block, pubsub.Drop} {
			t.Run(name+"/"+policy.String(), func(t *testing.T) {
				mgr := openDomain(t, "tcp")
				p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{keep, tag}, Mode: mode, Policy: policy,
					OnPublishCompleted: func(uint64, pubsub.Status) {}})
				r := &v1Reader{next: map[uint64]uint64{}, seqs: map[uint64][]uint64{}}
				sub := newSubscriber(t, mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()), OnBuffer: r.onBuffer})
				bufs := [][]byte{make([]byte, 40), make([]byte, 40)} // zero-copy: untouched until completed
				publish := func(seq uint64) pubsub.Status {
					b := payload(bufs[seq%2], tag, seq)
					if mode == pubsub.ZeroCopy {
						return p.PublishZeroCopy(tag, 0, b, seq)
					}
					return p.Publish(tag, b)
				}
				require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), keep, tag))
				require.Equal(t, pubsub.OK, publish(0))
				require.Equal(t, pubsub.OK, publish(1))
				waitFor(t, 5*time.Second, func() bool { got, _ := r.received(tag); return len(got) == 2 }, "two messages numbered")
				require.NoError(t, sub.Unsubscribe(ctxT(t, 10*time.Second), tag))
				require.Equal(t, pubsub.NoSubscriptions, publish(2), "numbered all the same")
				require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag))
				require.Equal(t, pubsub.OK, publish(3))
				waitFor(t, 5*time.Second, func() bool { got, _ := r.received(tag); return len(got) == 3 }, "the third message numbered")
				got, lost := r.received(tag)
				assert.Equal(t, []uint64{0, 1, 3}, got)
				assert.Zero(t, lost, "messages before any SYNC of their tag")
			})
		}
	}
}
