package endpoint_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// stalledReceiver is a listener whose OnData blocks until released: the
// peer stops taking data, as a hung host or a pulled cable would.
func stalledReceiver(t *testing.T, prov string, bufSize int) (addr string, release func()) {
	mgr := openDomain(t, prov)
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	cfg := newReceiver().config(netio.ReceiveParams{BufferSize: bufSize, BufferCount: 4})
	cfg.OnData = func(*endpoint.ReceiveEndpoint, []byte) { <-gate }
	l := listen(t, mgr, cfg)
	t.Cleanup(release) // before the listener's Close, which waits for OnData
	return l.Addr(), release
}

// On tcp a send stays pending until the peer's kernel has taken it. sockets
// is left out: it completes sends once its own thread has buffered them
// and buffers whatever a stalled peer leaves (1337 MiB in one run), so
// nothing stays pending there.
func TestProgressTimeoutFailsPendingSends(t *testing.T) {
	for _, prov := range []string{"tcp"} {
		t.Run(prov, func(t *testing.T) {
			addr, _ := stalledReceiver(t, prov, 1<<20)
			mgr := openDomain(t, prov)
			snd := newSender(1024)
			// 32 MiB: more than the socket buffers hold, so sends stay
			// pending once the peer stops reading.
			cfg := snd.config(netio.BufferedSendParams{BufferSize: 1 << 20, BufferCount: 32})
			cfg.ProgressTimeout = 200 * time.Millisecond
			ep := dial(t, mgr, addr, cfg)

			sent := fillPending(ep)
			t.Logf("%d sends posted before the stall", sent)
			err := recvErr(t, snd.closed, 10*time.Second, "progress timeout")
			assert.ErrorIs(t, err, netio.ErrTimeout)
			assert.ErrorIs(t, err, netio.ErrConnectionClosed)

			// Keys are buffer IDs, reused after each completion: every post
			// is reported once, so the reports add up to the posts.
			snd.mu.Lock()
			reports := 0
			for _, sts := range snd.statuses {
				reports += len(sts)
			}
			snd.mu.Unlock()
			assert.Equal(t, sent, reports, "every send reported once")
			s := ep.Stats()
			assert.Equal(t, s.Sent, s.Completed+s.Failed)
			ep.NumAvailableBuffers() // the minimum since the last call
			assert.Equal(t, 32, ep.NumAvailableBuffers(), "every buffer back")
			assert.Nil(t, ep.GetBuffer(), "the endpoint is closed")
		})
	}
}

func TestProgressTimeoutSparesAnIdleConnection(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	snd := newSender(16)
	cfg := snd.config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 4})
	cfg.ProgressTimeout = 20 * time.Millisecond
	ep := dial(t, mgr, l.Addr(), cfg)
	buf := ep.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, ep.SendBuffer(buf, 10))
	<-snd.done
	time.Sleep(200 * time.Millisecond) // ten timeouts with nothing pending
	select {
	case err := <-snd.closed:
		t.Fatalf("idle connection closed: %v", err)
	default:
	}
	buf = ep.GetBuffer()
	require.NotNil(t, buf)
	assert.Equal(t, netio.OK, ep.SendBuffer(buf, 10), "still connected")
	<-snd.done
}

// A poller kept from running (here by a callback that blocks; on a loaded
// machine by the scheduler) delivers no completion, so the watchdog sees
// a send pending with no progress: its verdict is confirmed once the
// poller has read its queue empty, where the waiting completion shows the
// connection healthy. Without that, the connection was ended as soon as
// the poller ran again (TestProgressTimeoutSparesAnIdleConnection and
// TestListenRepliesProgressTimeoutSparesIdle failed under load).
func TestProgressTimeoutWaitsForALatePoller(t *testing.T) {
	const timeout = 50 * time.Millisecond
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	snd := newSender(16)
	cfg := snd.config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 4})
	cfg.ProgressTimeout = timeout
	held := make(chan struct{})
	var first atomic.Bool
	report := cfg.OnSendCompleted
	cfg.OnSendCompleted = func(key uint64, st netio.Status) {
		if first.CompareAndSwap(false, true) {
			close(held)
			time.Sleep(8 * timeout) // the poller, kept from running
		}
		report(key, st)
	}
	ep := dial(t, mgr, l.Addr(), cfg)
	send := func() {
		buf := ep.GetBuffer()
		require.NotNil(t, buf)
		require.Equal(t, netio.OK, ep.SendBuffer(buf, 10))
	}
	reported := func(n int) {
		for i := range n {
			select {
			case <-snd.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("send %d of %d not reported", i, n)
			}
		}
	}
	send()
	<-held
	send() // while the poller is held: pending, its completion unread
	reported(2)
	send() // still connected
	reported(1)
	select {
	case err := <-snd.closed:
		t.Fatalf("closed by the watchdog while its poller was held: %v", err)
	default:
	}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	for key, sts := range snd.statuses { // keys are buffer IDs, reused
		for _, st := range sts {
			assert.Equal(t, netio.OK, st, "key %d", key)
		}
	}
}

func TestDeliveryComplete(t *testing.T) {
	t.Run("tcp waits for the peer", func(t *testing.T) {
		addr, release := stalledReceiver(t, "tcp", 4096)
		mgr := openDomain(t, "tcp")
		snd := newSender(16)
		cfg := snd.config(netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16})
		cfg.DeliveryComplete = true
		ep := dial(t, mgr, addr, cfg)
		for range 8 { // 4 fit the peer's posted buffers; the stall holds the rest
			buf := ep.GetBuffer()
			require.NotNil(t, buf)
			require.Equal(t, netio.OK, ep.SendBuffer(buf, 100))
		}
		time.Sleep(100 * time.Millisecond)
		snd.mu.Lock()
		early := len(snd.statuses)
		snd.mu.Unlock()
		assert.LessOrEqual(t, early, 5, "sends not placed at the peer are not complete")
		release()
		for range 8 - early {
			<-snd.done
		}
	})
	t.Run("sockets refuses", func(t *testing.T) {
		mgr := openDomain(t, "sockets")
		l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
		_, err := endpoint.Dial(t.Context(), mgr, l.Addr(), endpoint.SendConfig{DeliveryComplete: true})
		assert.ErrorIs(t, err, netio.ErrNotSupported)
	})
}
