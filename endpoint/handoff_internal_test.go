package endpoint

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
)

// handOffRig is a tcp domain, a poller the send endpoint shares (so that a
// test can hold it and read its counters), and a listener that counts
// messages of up to HandOffSize bytes. Completions are recorded.
type handOffRig struct {
	mgr      *domain.Manager
	p        *cq.Poller
	l        *Listener
	received atomic.Int64

	mu       sync.Mutex
	statuses []netio.Status // in the order reported; keys may repeat (a buffer ID is reused)
}

// tcpWithPoller opens a tcp domain on 127.0.0.1 and a poller in it, both
// closed at the end of the test.
func tcpWithPoller(t *testing.T) (*domain.Manager, *cq.Poller) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	p, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return mgr, p
}

func newHandOffRig(t *testing.T, rxBufs int) *handOffRig {
	r := &handOffRig{}
	r.mgr, r.p = tcpWithPoller(t)
	var err error
	r.l, err = Listen(r.mgr, "127.0.0.1:0", ListenConfig{
		Params: netio.ReceiveParams{BufferSize: HandOffSize, BufferCount: rxBufs},
		OnData: func(*ReceiveEndpoint, []byte) { r.received.Add(1) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.l.Close()) })
	return r
}

// config is a send config on the rig's poller that records completions.
func (r *handOffRig) config() SendConfig {
	return SendConfig{Runtime: cq.Runtime{Poller: r.p}, OnSendCompleted: func(_ uint64, st netio.Status) {
		r.mu.Lock()
		r.statuses = append(r.statuses, st)
		r.mu.Unlock()
	}}
}

// reported returns how many completions have been reported.
func (r *handOffRig) reported() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.statuses)
}

// outcomes counts the reported statuses.
func (r *handOffRig) outcomes() map[netio.Status]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[netio.Status]int{}
	for _, st := range r.statuses {
		counts[st]++
	}
	return counts
}

// queuedEndpoint is what the hand-off tests need of either send endpoint
// kind.
type queuedEndpoint struct {
	conn    *sendConn
	send    func() netio.Status // one send of HandOffSize bytes
	stats   func() SendStats
	pending func() []uint64
	close   func() error
}

// dialBuffered dials a buffered endpoint of bufs buffers of HandOffSize.
func dialBuffered(t *testing.T, r *handOffRig, bufs int) queuedEndpoint {
	cfg := r.config()
	cfg.Params = netio.BufferedSendParams{BufferSize: HandOffSize, BufferCount: bufs}
	s, err := Dial(context.Background(), r.mgr, r.l.Addr(), cfg)
	require.NoError(t, err)
	send := func() netio.Status {
		buf := s.GetBuffer()
		if buf == nil { // after the end: try one it holds no more
			buf = s.pool.Lookup(0)
		}
		return s.SendBuffer(buf, HandOffSize)
	}
	return queuedEndpoint{&s.c, send, s.Stats, s.PendingSends, s.Close}
}

// dialZeroCopyRig dials a zero-copy endpoint of slots header slots, sending
// HandOffSize bytes of one region.
func dialZeroCopyRig(t *testing.T, r *handOffRig, slots int) queuedEndpoint {
	mem, err := domain.Alloc(HandOffSize)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, domain.Free(mem)) })
	cfg := r.config()
	z, err := DialZeroCopy(context.Background(), r.mgr, r.l.Addr(), ZeroCopyConfig{
		HeaderCount: slots, Region: mem, Runtime: cq.Runtime{Poller: cfg.Poller}, OnSendCompleted: cfg.OnSendCompleted,
	})
	require.NoError(t, err)
	var key uint64
	send := func() netio.Status { key++; return z.Send(nil, mem, key) }
	return queuedEndpoint{&z.c, send, z.Stats, z.PendingSends, z.Close}
}

var handOffKinds = map[string]func(t *testing.T, r *handOffRig, n int) queuedEndpoint{
	"buffered":  dialBuffered,
	"zero-copy": dialZeroCopyRig,
}

// eachKind runs test for each endpoint kind, on a fresh rig with an
// endpoint of sends buffers or slots, closed afterwards.
func eachKind(t *testing.T, sends int, test func(t *testing.T, r *handOffRig, e queuedEndpoint)) {
	for name, dial := range handOffKinds {
		t.Run(name, func(t *testing.T) {
			r := newHandOffRig(t, sends)
			e := dial(t, r, sends)
			defer func() { assert.NoError(t, e.close()) }()
			test(t, r, e)
		})
	}
}

// stubPost puts fn between the drain and the endpoint's post; fn gets the
// real post to call.
func stubPost(e queuedEndpoint, fn func(post func(*fabric.Endpoint, uint32, int) fabric.Errno, ep *fabric.Endpoint, key uint32, n int) fabric.Errno) {
	post := e.conn.PostFunc()
	e.conn.SetPostFunc(func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno { return fn(post, ep, key, n) })
}

// Sends still queued for the poller when the connection ends are reported
// Canceled, and what they hold goes back; none is posted after the close.
func TestHandOffQueuedSendsCanceledAtTeardown(t *testing.T) {
	const sends = 4
	eachKind(t, sends, func(t *testing.T, r *handOffRig, e queuedEndpoint) {
		// Hold the poller, then queue the teardown ahead of the drain that
		// the sends below schedule.
		release := make(chan struct{})
		poll.Of(r.p).Go(func() { <-release })
		poll.Of(r.p).Go(func() { e.conn.Teardown(netio.ErrClosed) })
		for range sends {
			require.Equal(t, netio.OK, e.send())
		}
		assert.True(t, e.conn.HandOffBusy(), "the sends wait for the poller")
		assert.Len(t, e.pending(), sends)
		close(release)

		require.Eventually(t, func() bool { return r.reported() == sends }, 10*time.Second, time.Millisecond,
			"every queued send reported")
		assert.Equal(t, map[netio.Status]int{netio.Canceled: sends}, r.outcomes())
		assert.Equal(t, SendStats{Sent: sends, Bytes: sends * HandOffSize, Failed: sends}, e.stats())
		assert.False(t, e.conn.HandOffBusy())
		assert.Empty(t, e.pending())
		assert.Equal(t, netio.Closed, e.send(), "nothing is queued after the end")
		assert.Zero(t, r.received.Load(), "nothing was posted")
	})
}

// A full transmit queue stalls the drain until a completion or the retry
// timer: the poller goes back to sleep meanwhile instead of retrying in a
// loop, and the sends go out in order once the provider takes them.
func TestHandOffStallsOnFullTransmitQueue(t *testing.T) {
	const sends = 4
	eachKind(t, sends, func(t *testing.T, r *handOffRig, e queuedEndpoint) {
		var refusing atomic.Bool
		var attempts atomic.Int64
		stubPost(e, func(post func(*fabric.Endpoint, uint32, int) fabric.Errno, ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
			attempts.Add(1)
			if refusing.Load() {
				return fabric.EAGAIN
			}
			return post(ep, key, n)
		})

		refusing.Store(true)
		for range sends {
			require.Equal(t, netio.OK, e.send())
		}
		require.Eventually(t, func() bool { return attempts.Load() > 0 }, 5*time.Second, time.Millisecond, "a drain ran")
		sleeps := r.p.Stats().Sleeps
		time.Sleep(400 * time.Millisecond)
		// Retries every sendcore.HandOffRetry for the stall's first 64 ms,
		// then doubling to 64 ms, let the poller sleep between them; a drain
		// that retries in a loop never lets it. Nothing is in flight, so no
		// completion retries: 1 ms apart for good they would be about 400
		// here, backing off about 75 (fewer on a busy machine).
		assert.Greater(t, r.p.Stats().Sleeps-sleeps, uint64(2), "the poller sleeps while the drain is stalled")
		assert.Less(t, attempts.Load(), int64(150), "retries back off after 64 ms, not spun nor every %v", sendcore.HandOffRetry)
		assert.True(t, e.conn.HandOffBusy())
		assert.Zero(t, r.received.Load())

		refusing.Store(false)
		require.Eventually(t, func() bool { return r.received.Load() == sends && r.reported() == sends },
			10*time.Second, time.Millisecond, "every send delivered and completed")
		assert.Equal(t, map[netio.Status]int{netio.OK: sends}, r.outcomes())
		assert.Equal(t, SendStats{Sent: sends, Bytes: sends * HandOffSize, Completed: sends}, e.stats())
	})
}

// A queued send the provider refuses for good is reported Failed, once, and
// what it held comes back; the sends behind it still go out.
func TestHandOffRefusedPostReportedFailed(t *testing.T) {
	const sends = 4
	eachKind(t, sends, func(t *testing.T, r *handOffRig, e queuedEndpoint) {
		var refused atomic.Bool
		stubPost(e, func(post func(*fabric.Endpoint, uint32, int) fabric.Errno, ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
			if refused.CompareAndSwap(false, true) {
				return fabric.EMSGSIZE // the first one
			}
			return post(ep, key, n)
		})
		for range sends {
			require.Equal(t, netio.OK, e.send())
		}
		require.Eventually(t, func() bool { return r.reported() == sends && r.received.Load() == sends-1 },
			10*time.Second, time.Millisecond, "every send reported, all but the refused one delivered")
		assert.Equal(t, map[netio.Status]int{netio.OK: sends - 1, netio.Failed: 1}, r.outcomes())
		assert.Equal(t, SendStats{Sent: sends, Bytes: sends * HandOffSize, Completed: sends - 1, Failed: 1}, e.stats())
		assert.Empty(t, e.pending(), "the refused send's buffer or slot is back")
		assert.Equal(t, netio.OK, e.send(), "and can be used again")
	})
}
