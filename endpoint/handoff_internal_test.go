package endpoint

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

func TestHandOffRing(t *testing.T) {
	var h handOff
	h.init(2)
	const a, b, c = 7, 8, 9
	assert.False(t, h.busy())

	queued, schedule := h.push(a, 1)
	assert.True(t, queued)
	assert.True(t, schedule, "the first push schedules a drain")
	queued, schedule = h.push(b, 2)
	assert.True(t, queued)
	assert.False(t, schedule, "a drain is due already")
	queued, _ = h.push(c, 3)
	assert.False(t, queued, "the ring holds two")
	assert.True(t, h.busy())

	q, ok := h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{a, 1}, q)
	q, _ = h.peek()
	assert.Equal(t, queuedSend{a, 1}, q, "peek leaves the send queued until pop")
	h.pop()
	q, ok = h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{b, 2}, q)
	queued, schedule = h.push(c, 3) // wraps around the ring's end
	assert.True(t, queued)
	assert.False(t, schedule, "still draining")
	h.pop()
	q, _ = h.peek()
	assert.Equal(t, queuedSend{c, 3}, q)
	h.pop()

	_, ok = h.peek()
	assert.False(t, ok)
	assert.False(t, h.busy())
	_, schedule = h.push(a, 1)
	assert.True(t, schedule, "an empty peek ended the drain: the next push schedules one")

	h.reset()
	assert.False(t, h.busy())
	_, ok = h.peek()
	assert.False(t, ok)
	assert.Equal(t, make([]queuedSend, 2), h.ring, "reset lets go of the buffers")
}

// queuedEndpoint is what TestHandOffQueuedSendsCanceledAtTeardown needs of
// either send endpoint kind.
type queuedEndpoint struct {
	conn    *sendConn
	send    func() netio.Status // one send of HandOffSize bytes
	stats   func() SendStats
	pending func() []uint64
	close   func() error
}

// Sends still queued for the poller when the connection ends are reported
// Canceled, and what they hold goes back; none is posted after the close.
func TestHandOffQueuedSendsCanceledAtTeardown(t *testing.T) {
	const sends = 4
	kinds := map[string]func(t *testing.T, mgr *domain.Manager, addr string, cfg SendConfig) queuedEndpoint{
		"buffered": func(t *testing.T, mgr *domain.Manager, addr string, cfg SendConfig) queuedEndpoint {
			cfg.Params = netio.BufferedSendParams{BufferSize: HandOffSize, BufferCount: sends}
			s, err := Dial(context.Background(), mgr, addr, cfg)
			require.NoError(t, err)
			send := func() netio.Status {
				buf := s.GetBuffer()
				if buf == nil { // after the end: try one it holds no more
					buf = s.pool.Lookup(0)
				}
				return s.SendBuffer(buf, HandOffSize)
			}
			return queuedEndpoint{&s.c, send, s.Stats, s.PendingSends, s.Close}
		},
		"zero-copy": func(t *testing.T, mgr *domain.Manager, addr string, cfg SendConfig) queuedEndpoint {
			mem, err := domain.Alloc(HandOffSize)
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, domain.Free(mem)) })
			z, err := DialZeroCopy(context.Background(), mgr, addr, ZeroCopyConfig{
				HeaderCount: sends, Region: mem, Poller: cfg.Poller, OnSendCompleted: cfg.OnSendCompleted,
			})
			require.NoError(t, err)
			var key uint64
			send := func() netio.Status { key++; return z.Send(nil, mem, key) }
			return queuedEndpoint{&z.c, send, z.Stats, z.PendingSends, z.Close}
		},
	}
	for name, dial := range kinds {
		t.Run(name, func(t *testing.T) {
			mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
			require.NoError(t, err)
			defer func() { assert.NoError(t, mgr.Close()) }()
			p, err := cq.Open(mgr.Fabric(), mgr.Domain(), cq.Config{})
			require.NoError(t, err)
			defer func() { assert.NoError(t, p.Close()) }()
			l, err := Listen(mgr, "127.0.0.1:0", ListenConfig{
				Params: netio.ReceiveParams{BufferSize: HandOffSize, BufferCount: sends},
				OnData: func(*ReceiveEndpoint, []byte) {},
			})
			require.NoError(t, err)
			defer func() { assert.NoError(t, l.Close()) }()

			var mu sync.Mutex
			statuses := map[uint64]netio.Status{}
			e := dial(t, mgr, l.Addr(), SendConfig{Poller: p, OnSendCompleted: func(key uint64, st netio.Status) {
				mu.Lock()
				statuses[key] = st
				mu.Unlock()
			}})
			defer func() { assert.NoError(t, e.close()) }()

			// Hold the poller, then queue the teardown ahead of the drain
			// that the sends below schedule.
			release := make(chan struct{})
			p.Go(func() { <-release })
			p.Go(func() { e.conn.teardown(netio.ErrClosed) })
			for range sends {
				require.Equal(t, netio.OK, e.send())
			}
			assert.True(t, e.conn.handOff.busy(), "the sends wait for the poller")
			assert.Len(t, e.pending(), sends)
			close(release)

			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(statuses) == sends
			}, 10*time.Second, time.Millisecond, "every queued send reported")
			mu.Lock()
			for key, st := range statuses {
				assert.Equal(t, netio.Canceled, st, "key %d", key)
			}
			mu.Unlock()
			assert.Equal(t, SendStats{Sent: sends, Bytes: sends * HandOffSize, Failed: sends}, e.stats())
			assert.False(t, e.conn.handOff.busy())
			assert.Empty(t, e.pending())
			assert.Equal(t, netio.Closed, e.send(), "nothing is queued after the end")
		})
	}
}
