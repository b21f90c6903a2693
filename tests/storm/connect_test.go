package storm_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/tests/storm/leakcheck"
	"github.com/netio-go/netio/tests/storm/traffic"
)

// connectCloseCycles returns how many connect/close cycles to run on prov.
// sockets sets up and tears down a connection ten times slower than tcp
// here (its connection-manager and progress threads compete with -race for
// 2 cores): 2000 cycles took 29 s on sockets, 3 s on tcp, and longer on a
// loaded machine. sockets runs 400 so that the package stays within a
// minute.
func connectCloseCycles(prov string) int {
	n := 2000
	if prov == "sockets" {
		n = 400
	}
	if testing.Short() {
		n /= 10
	}
	return n
}

// Receive parameters of the connect/close storm: small, so that a stale
// connection's holdings are easy to account for.
var stormRecv = netio.ReceiveParams{BufferSize: 64, BufferCount: 4}

// TestConnectCloseStorm dials, sends one message, waits for its completion
// and closes, many times against one listener. Every message must arrive
// exactly once, every connection must be accepted, and afterwards the
// process must hold what it held before.
//
// On sockets a few receive endpoints never hear that their peer left: the
// sockets provider (libfabric 1.17) loses the end of a connection whose
// peer closes while fi_accept is still running. fi_accept sends the accept
// reply and starts watching the connection socket before it marks the
// endpoint connected, so an EOF read in between is taken for "already
// disconnected" and no FI_SHUTDOWN is ever reported; the receive endpoint
// lives, with its buffers registered, until the listener closes. A sender
// that closes right after its first completion hits that window in a few
// percent of cycles on 2 busy cores. Those endpoints are counted and
// logged, what the process holds is checked to be exactly their buffers,
// and closing the listener must free them.
func TestConnectCloseStorm(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			cycles := connectCloseCycles(prov)
			mgr := openDomain(t, prov)
			var (
				mu   sync.Mutex
				seen = make(map[uint64]int, cycles)
			)
			cfg := endpoint.ListenConfig{
				Params: stormRecv,
				OnData: func(_ *endpoint.ReceiveEndpoint, data []byte) {
					mu.Lock()
					seen[binary.LittleEndian.Uint64(data)]++
					mu.Unlock()
				},
			}
			delivered := func(n int) func() bool {
				return func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(seen) == n
				}
			}

			// A listener and a connection first and gone again, so that
			// what the provider opens once per process is in the baselines.
			// Closing the listener also ends a connection sockets may have
			// left open (see above).
			warm := traffic.Listen(t, mgr, cfg)
			connectSendClose(t, mgr, warm.Addr(), 0)
			require.Eventually(t, delivered(1), waitTimeout, time.Millisecond, "warm-up message delivered")
			require.NoError(t, warm.Close())
			clear(seen)
			empty := leakcheck.Steady(mgr)

			l := traffic.Listen(t, mgr, cfg)
			connectSendClose(t, mgr, l.Addr(), 0)
			require.Eventually(t, delivered(1), waitTimeout, time.Millisecond, "warm-up message delivered")
			warmStale := l.EndStale(t, waitTimeout)
			if prov != "sockets" {
				assert.Zero(t, warmStale, "warm-up connection whose end the listener never saw")
			}
			l.WaitQuiet(t, waitTimeout)
			before := leakcheck.Steady(mgr)

			start := time.Now()
			var mid leakcheck.Snapshot
			for i := 1; i <= cycles; i++ {
				if snap := connectSendClose(t, mgr, l.Addr(), uint64(i)); i == cycles/2 {
					mid = snap
				}
			}
			took := time.Since(start)
			t.Logf("%s: %d connect/close cycles in %v (%.0f per second)", prov, cycles,
				took.Round(time.Millisecond), float64(cycles)/took.Seconds())
			t.Logf("%s: with a connection open: %v", prov, mid)
			// A connection holds a send pool, a receive region and a
			// poller: the measures must see it, or their return proves
			// nothing.
			assert.Greater(t, mid.Registrations, before.Registrations, "registrations while connected")
			assert.Greater(t, mid.MappedBytes, before.MappedBytes, "mapped bytes while connected")
			assert.Greater(t, mid.FDs, before.FDs, "file descriptors while connected")
			assert.Greater(t, mid.Goroutines, before.Goroutines, "goroutines while connected")

			require.Eventually(t, delivered(cycles+1), waitTimeout, time.Millisecond, "messages delivered")
			stale := l.WaitSteady(t, waitTimeout)
			if prov == "sockets" {
				// See sockets' lost shutdowns, above.
				leakcheck.AssertOnlyReceivers(t, mgr, before, stale, stormRecv, "sockets storm, listener open")
			} else {
				assert.Zero(t, stale, "connections whose end the listener never saw")
				leakcheck.AssertBack(t, mgr, before, prov+" storm, listener open")
			}
			assert.Equal(t, uint64(cycles+2), l.Accepted()+warm.Accepted(), "connections accepted")
			assert.Equal(t, int64(cycles+1), l.Established.Load(), "connections established")
			assert.Equal(t, int64(cycles+1-stale), l.Closed.Load(), "connections closed")
			// Only the warm-up connection EndStale closed may have ended
			// otherwise than by its peer's shutdown.
			assert.Equal(t, int64(warmStale), l.Unexpected.Load(), "connections that ended with an error")

			require.NoError(t, l.Close())
			leakcheck.AssertBack(t, mgr, empty, prov+" storm, listener closed")
			mu.Lock()
			defer mu.Unlock()
			for i := range uint64(cycles + 1) {
				if n := seen[i]; n != 1 {
					assert.Failf(t, "message delivered wrongly", "message %d delivered %d times", i, n)
				}
			}
		})
	}
}

// connectSendClose runs one cycle: dial, send message i, wait for its
// completion, close. It returns a snapshot taken while connected.
func connectSendClose(t *testing.T, mgr *domain.Manager, addr string, i uint64) leakcheck.Snapshot {
	t.Helper()
	completed := make(chan netio.Status, 1)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, addr, endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: 64, BufferCount: 2},
		OnSendCompleted: func(_ uint64, st netio.Status) { completed <- st },
	})
	require.NoError(t, err, "cycle %d: dial", i)
	defer func() { require.NoError(t, s.Close(), "cycle %d: close", i) }()
	buf := s.GetBuffer()
	require.NotNil(t, buf, "cycle %d", i)
	binary.LittleEndian.PutUint64(buf.Bytes(), i)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 8), "cycle %d", i)
	select {
	case st := <-completed:
		require.Equal(t, netio.OK, st, "cycle %d: send completion", i)
	case <-ctx.Done():
		require.FailNow(t, "no send completion", "cycle %d", i)
	}
	return leakcheck.Take(mgr)
}
