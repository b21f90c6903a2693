package pubsub_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// arrival is one message of the moving tag: who sent it, and its number.
type arrival struct {
	pub string
	seq uint64
}

// arrivals records the messages of one tag in arrival order.
type arrivals struct {
	mu   sync.Mutex
	list []arrival
}

func (a *arrivals) add(m pubsub.Message) {
	a.mu.Lock()
	a.list = append(a.list, arrival{m.Publisher, m.Seq})
	a.mu.Unlock()
}

// from counts the messages that came from pub.
func (a *arrivals) from(pub string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, x := range a.list {
		if x.pub == pub {
			n++
		}
	}
	return n
}

// check asserts that the messages came from first, then from second,
// each run numbered without a hole, the first run from firstSeq.
func (a *arrivals) check(t *testing.T, name, first, second string, firstSeq uint64) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotEmpty(t, a.list, name)
	i := 0
	for ; i < len(a.list) && a.list[i].pub == first; i++ {
		assert.Equal(t, firstSeq+uint64(i), a.list[i].seq, "%s: message %d of %s", name, i, first)
	}
	require.Less(t, i, len(a.list), "%s: nothing from %s", name, second)
	start := a.list[i].seq
	for j, x := range a.list[i:] {
		if !assert.Equal(t, arrival{second, start + uint64(j)}, x, "%s: message %d after the move", name, j) {
			return
		}
	}
}

// publishLoop publishes tag on p from seq on, retrying NoResources, until
// stop is closed or p is closed.
func publishLoop(p *pubsub.Publisher, tag, seq uint64, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 64)
	for {
		select {
		case <-stop:
			return
		default:
		}
		switch p.Publish(tag, payload(buf, tag, seq)) {
		case pubsub.NoResources:
			time.Sleep(50 * time.Microsecond)
		case pubsub.Closed:
			return
		default: // OK or NoSubscriptions: the number is used
			seq++
			if seq%64 == 0 {
				time.Sleep(100 * time.Microsecond) // a steady flow, not a flood
			}
		}
	}
}

// TestTagMovesBetweenPublishers: a tag served by publisher A, then by A
// and B at once, then by B alone (A closes) while both publish it, each
// numbering it its own way. Subscribers stay with A while it serves the
// tag and get nothing of B's; then they follow the tag to B through the
// bus and count B's numbers as a new stream: no gap, no reset, no
// out-of-sequence count, one move, and every message of each publisher in
// order. Subscriber 1 reaches B over a data connection older than A's
// (it subscribed a tag of B first), subscriber 2 over a newer one: before
// the rule, the first lost every message of B, the second reported a
// bogus gap.
func TestTagMovesBetweenPublishers(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			const tag, other, firstA, firstB = 7, 20, 5000, 1_000_000
			mgr := openDomain(t, prov)
			dir := t.TempDir()
			pubBus, subBus := fastBus(t, dir), fastBus(t, dir)
			first := func(n uint64) func(uint64) uint64 { return func(uint64) uint64 { return n } }
			pB := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{other}, Bus: pubBus, BusID: "B",
				Policy: pubsub.Block, FirstSequence: first(firstB)})
			pA, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{tag}, Bus: pubBus,
				BusID: "A", Policy: pubsub.Block, FirstSequence: first(firstA)})
			require.NoError(t, err)
			defer func() { assert.NoError(t, pA.Close()) }()

			var got [2]arrivals
			var subs [2]*pubsub.Subscriber
			for i := range subs {
				col := newCollector()
				cfg := col.config("")
				cfg.Bus, cfg.ResolveInterval = subBus, 20*time.Millisecond
				cfg.OnMessage = func(m pubsub.Message) {
					col.onMessage(m)
					if m.Tag == tag {
						got[i].add(m)
					}
				}
				subs[i] = newSubscriber(t, mgr, cfg)
				t.Cleanup(func() { assert.Empty(t, col.problems(), "subscriber %d", i+1) })
			}
			require.NoError(t, subs[0].Subscribe(ctxT(t, 10*time.Second), other)) // B's connection first
			for _, s := range subs {
				require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), tag))
			}
			require.NoError(t, pB.AddTags(tag)) // both serve the tag now

			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go publishLoop(pA, tag, firstA, stop, &wg)
			go publishLoop(pB, tag, firstB, stop, &wg)
			halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
			defer halt()
			for i := range subs {
				waitFor(t, 10*time.Second, func() bool { return got[i].from(pA.Addr()) >= 200 }, "subscriber %d: 200 of A's", i+1)
			}
			require.NoError(t, pA.Close())
			for i := range subs {
				waitFor(t, 10*time.Second, func() bool { return got[i].from(pB.Addr()) >= 200 }, "subscriber %d: 200 of B's after the move", i+1)
			}
			halt()

			for i, s := range subs {
				name := []string{"subscriber 1", "subscriber 2"}[i]
				got[i].check(t, name, pA.Addr(), pB.Addr(), firstA)
				st, ok := s.TagStats(tag)
				require.True(t, ok, name)
				assert.Zero(t, st.Gaps, "%s: a move to another numbering is not a gap", name)
				assert.Zero(t, st.Missed, name)
				assert.Zero(t, st.Resets, name)
				assert.Zero(t, st.OutOfSequence, name)
				assert.Equal(t, uint64(1), st.Moves, name)
				assert.Equal(t, uint64(1), s.Stats().Moves, name)
			}
			// The manager's snapshot (and so Prometheus) carries the moves.
			var moves, tagMoves uint64
			for _, r := range mgr.Snapshot().Subscribers {
				moves += r.Moves
				for _, rt := range r.Tags {
					if rt.Tag == tag {
						tagMoves += rt.Moves
					}
				}
			}
			assert.Equal(t, uint64(len(subs)), moves, "snapshot: subscribers' moves")
			assert.Equal(t, uint64(len(subs)), tagMoves, "snapshot: the tag's moves")
		})
	}
}
