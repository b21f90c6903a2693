package endpoint

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
)

// A receiving connection closed on this side delivers, before it ends,
// every message the provider had already placed in its buffers: with
// DeliveryComplete the provider acknowledged each at placement, so its
// sender has it reported OK. The poll loop reads at most 16 batches or
// error completions a round before it runs queued work, so once another
// connection's close had left its 64 flushed receives (FI_ECANCELED) in
// the queue, a Close queued meanwhile ran while this connection's placed
// messages still waited behind them, and they were dropped: reported OK,
// never delivered (the large soak's loss). The test lays that order out
// on the listener's poller goroutine: B's messages wait in B's socket, A
// closes (its read-out reads A's 64 flushed receives, one a read, and each
// read's progress places B's messages behind them), and B closes at once,
// so that only B's own read-out can deliver them.
func TestReceiveCloseDeliversWhatTheProviderPlaced(t *testing.T) {
	mgr := openTCP(t)

	const count = 8
	var mu sync.Mutex
	delivered := map[uint64]bool{}
	established := make(chan *ReceiveEndpoint, 2)
	l, err := Listen(mgr, "127.0.0.1:0", ListenConfig{
		Params: netio.ReceiveParams{BufferSize: 64, BufferCount: 64},
		OnData: func(_ *ReceiveEndpoint, data []byte) {
			mu.Lock()
			delivered[binary.LittleEndian.Uint64(data)] = true
			mu.Unlock()
		},
		OnConnectionEstablished: func(r *ReceiveEndpoint) { established <- r },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })

	reports := make(chan [2]uint64, count) // buffer ID, status
	dial := func(onDone func(uint64, netio.Status)) (*SendEndpointBuffered, *ReceiveEndpoint) {
		s, err := Dial(context.Background(), mgr, l.Addr(), SendConfig{
			Params:           netio.BufferedSendParams{BufferSize: 64, BufferCount: count},
			DeliveryComplete: true,
			OnSendCompleted:  onDone,
		})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, s.Close()) })
		select {
		case r := <-established:
			return s, r
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the connection was never established")
			return nil, nil
		}
	}
	_, ra := dial(nil)
	b, rb := dial(func(key uint64, st netio.Status) { reports <- [2]uint64{key, uint64(st)} })

	// A first round through every posted buffer of B's connection twice,
	// each reposted once delivered: the read-out counts the receives it
	// still waits for, so it must count the reposts too (without them it
	// took the connection for read out and read nothing).
	const warm = 2 * 64
	for seq := uint64(1000); seq < 1000+warm; seq++ {
		buf := b.GetBuffer()
		require.NotNil(t, buf, "a send buffer is back after its report")
		binary.LittleEndian.PutUint64(buf.Bytes(), seq)
		require.Equal(t, netio.OK, b.SendBuffer(buf, 8))
		select {
		case r := <-reports:
			require.Equal(t, netio.OK, netio.Status(r[1]), "warm-up message %d", seq)
		case <-time.After(30 * time.Second):
			require.FailNow(t, "a warm-up send was never reported")
		}
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == warm
	}, 30*time.Second, time.Millisecond, "the warm-up messages delivered (and their buffers reposted)")

	seqOf := map[uint64]uint64{} // buffer ID to the message it carried
	var posted int
	l.poller.Do(func() {
		for seq := uint64(1); seq <= count; seq++ {
			buf := b.GetBuffer()
			if buf == nil {
				return
			}
			binary.LittleEndian.PutUint64(buf.Bytes(), seq)
			seqOf[buf.ID()] = seq
			if b.SendBuffer(buf, 8) != netio.OK {
				return
			}
			posted++
		}
		ra.teardown(netio.ErrClosed) // its 64 receives are flushed into the queue
		rb.teardown(netio.ErrClosed)
	})
	require.Equal(t, count, posted, "every send posted")

	ok := 0
	for range count {
		select {
		case r := <-reports:
			if netio.Status(r[1]) != netio.OK {
				continue
			}
			ok++
			mu.Lock()
			got := delivered[seqOf[r[0]]]
			mu.Unlock()
			assert.True(t, got, "message %d reported OK (delivery complete) but never delivered", seqOf[r[0]])
		case <-time.After(30 * time.Second):
			require.FailNow(t, "a send was never reported")
		}
	}
	t.Logf("%d of %d reported OK", ok, count)
}

// A callback cannot read the queue out: the completions of the read it is
// called from are still being dispatched, and another read would
// overwrite them. So a Close from OnData leaves the read-out to the
// poller's run queue (ReceiveEndpoint.teardown).
func TestReadOutRefusesInsideACallback(t *testing.T) {
	mgr := openTCP(t)
	var l *Listener
	readOut := make(chan bool, 1)
	l, err := Listen(mgr, "127.0.0.1:0", ListenConfig{
		OnData: func(*ReceiveEndpoint, []byte) {
			select {
			case readOut <- l.poller.ReadOut(func() bool { return false }):
			default:
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	s, err := Dial(context.Background(), mgr, l.Addr(), SendConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 8))
	select {
	case ok := <-readOut:
		assert.False(t, ok, "ReadOut read inside a callback")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the message was never delivered")
	}
}

// openTCP opens a tcp domain on loopback, closed at cleanup.
func openTCP(t *testing.T) *domain.Manager {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	return mgr
}
