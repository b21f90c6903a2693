package stats_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/stats"
)

// counting is a part whose counter grows while it is registered.
type counting struct{ sent atomic.Uint64 }

func (c *counting) fill(e *stats.Endpoint) { e.MessagesSent = c.sent.Load() }

func kindOf(t *testing.T, s stats.Snapshot, kind string) stats.Kind {
	t.Helper()
	for _, k := range s.Kinds {
		if k.Kind == kind {
			return k
		}
	}
	require.Failf(t, "kind missing", "%s not in %+v", kind, s.Kinds)
	return stats.Kind{}
}

func read(r *stats.Registry) stats.Snapshot {
	var s stats.Snapshot
	r.Read(&s)
	return s
}

func TestClosedEndpointsFoldIntoTotals(t *testing.T) {
	var r stats.Registry
	a, b := &counting{}, &counting{}
	ea := r.AddEndpoint(stats.Endpoint{Kind: stats.KindBuffered, Peer: "a"}, a.fill)
	r.AddEndpoint(stats.Endpoint{Kind: stats.KindBuffered, Peer: "b"}, b.fill)
	a.sent.Store(5)
	b.sent.Store(7)

	s := read(&r)
	require.Len(t, s.Endpoints, 2)
	assert.Equal(t, "a", s.Endpoints[0].Peer, "ordered by ID")
	assert.NotZero(t, s.Endpoints[0].ID)
	k := kindOf(t, s, stats.KindBuffered)
	assert.Equal(t, uint64(12), k.MessagesSent)
	assert.Equal(t, 2, k.Live)
	assert.Equal(t, uint64(2), k.Opened)

	ea.Remove(fmt.Errorf("%w: reset", netio.ErrConnectionClosed))
	ea.Remove(nil)    // once only
	a.sent.Store(100) // after Remove a part's counters are not read again
	s = read(&r)
	require.Len(t, s.Endpoints, 1)
	k = kindOf(t, s, stats.KindBuffered)
	assert.Equal(t, uint64(12), k.MessagesSent, "the closed endpoint's counters stay in the total")
	assert.Equal(t, 1, k.Live)
	assert.Equal(t, map[string]uint64{stats.ReasonPeer: 1}, k.Closed)
}

func TestCloseReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, stats.ReasonLocal},
		{netio.ErrClosed, stats.ReasonLocal},
		{fmt.Errorf("%w: %w: idle", netio.ErrConnectionClosed, netio.ErrTimeout), stats.ReasonTimeout},
		{fmt.Errorf("x: %w", netio.ErrConnectionClosed), stats.ReasonPeer},
		{errors.New("other"), stats.ReasonError},
	} {
		assert.Equal(t, tc.want, stats.CloseReason(tc.err), "%v", tc.err)
	}
}

func TestPollersSumByName(t *testing.T) {
	var r stats.Registry
	fill := func(n uint64) func(*stats.Poller) {
		return func(p *stats.Poller) {
			p.Completions = n
			p.Callbacks = stats.Histogram{Bounds: []float64{1e-6}, Counts: []uint64{n, 1}, Count: n + 1, SumSeconds: 1}
		}
	}
	e1 := r.AddPoller("readout", fill(3))
	r.AddPoller("readout", fill(4))
	r.AddPoller("builder", fill(10))
	e1.Remove(nil)
	s := read(&r)
	require.Len(t, s.Pollers, 2)
	require.Len(t, s.PollerTotals, 2)
	assert.Equal(t, "builder", s.PollerTotals[0].Name)
	readout := s.PollerTotals[1]
	assert.Equal(t, uint64(7), readout.Completions, "the closed poller stays in its name's total")
	assert.Equal(t, 1, readout.Live)
	assert.Equal(t, []uint64{7, 2}, readout.Callbacks.Counts)
	assert.Equal(t, uint64(9), readout.Callbacks.Count)
}

func TestListenersAndOtherSections(t *testing.T) {
	var r stats.Registry
	l := r.AddListener("127.0.0.1:1", func(s *stats.Listener) { s.Accepted, s.Refused, s.Active = 3, 1, 2 })
	r.AddListener("127.0.0.1:2", func(s *stats.Listener) { s.Accepted = 1 })
	c := r.AddCache(func(s *stats.Cache) { s.Hits = 9 })
	r.AddPool(func(s *stats.Pool) { s.Tiers = []stats.Tier{{Size: 64, Count: 2, Free: 1}} })
	r.AddPublisher("127.0.0.1:3", func(s *stats.Publisher) { s.Tags = []stats.PublisherTag{{Tag: 1, Published: 2}} })
	r.AddSubscriber(func(s *stats.Subscriber) { s.Messages = 2 })
	s := read(&r)
	assert.Equal(t, stats.Listener{Accepted: 4, Refused: 1, Active: 2}, s.ListenerTotals)
	assert.Equal(t, "127.0.0.1:1", s.Listeners[0].Addr)
	assert.Equal(t, uint64(9), s.Caches[0].Hits)
	assert.Equal(t, 64, s.Pools[0].Tiers[0].Size)
	assert.Equal(t, "127.0.0.1:3", s.Publishers[0].Addr)
	assert.Equal(t, uint64(2), s.Subscribers[0].Messages)

	l.Remove(nil)
	c.Remove(nil)
	s = read(&r)
	assert.Equal(t, stats.Listener{Accepted: 4, Refused: 1}, s.ListenerTotals, "a closed listener's counters stay")
	assert.Empty(t, s.Caches)
}

func TestNilRegistryAndEntry(t *testing.T) {
	var r *stats.Registry
	assert.NotPanics(t, func() {
		e := r.AddEndpoint(stats.Endpoint{Kind: "x"}, nil)
		assert.Nil(t, e)
		e.Remove(nil)
		var s stats.Snapshot
		r.Read(&s)
		assert.Empty(t, s.Endpoints)
	})
}

func TestSnapshotJSON(t *testing.T) {
	var r stats.Registry
	r.AddEndpoint(stats.Endpoint{Kind: stats.KindRDM}, func(e *stats.Endpoint) { e.BytesSent, e.Peers = 64, 2 })
	s := read(&r)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back stats.Snapshot
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s.Endpoints, back.Endpoints)
	assert.Contains(t, string(b), `"bytes_sent":64`)
	assert.Contains(t, string(b), `"peers":2`)
}

// TestConcurrentAddRemoveRead checks under -race that parts coming and
// going while snapshots are taken never lose or double a count.
func TestConcurrentAddRemoveRead(t *testing.T) {
	var r stats.Registry
	const workers, rounds = 4, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				c := &counting{}
				e := r.AddEndpoint(stats.Endpoint{Kind: stats.KindReceive}, c.fill)
				c.sent.Add(1)
				e.Remove(nil)
			}
		})
	}
	var last uint64
	for range 100 {
		k := read(&r).Kinds
		if len(k) == 1 {
			assert.GreaterOrEqual(t, k[0].MessagesSent, last, "the total never goes back")
			last = k[0].MessagesSent
		}
	}
	wg.Wait()
	k := kindOf(t, read(&r), stats.KindReceive)
	assert.Equal(t, uint64(workers*rounds), k.MessagesSent)
	assert.Equal(t, uint64(workers*rounds), k.Closed[stats.ReasonLocal])
	assert.Zero(t, k.Live)
}
