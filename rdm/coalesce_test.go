package rdm_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

// tagged records decoded messages by tag.
type tagged struct {
	mu     sync.Mutex
	byTag  map[uint64][][]byte
	status []uint8
	n      int
}

func newTagged() *tagged { return &tagged{byTag: map[uint64][][]byte{}} }

func (g *tagged) onMessage(_ *rdm.Endpoint, _ rdm.Peer, tag uint64, data []byte, status uint8) {
	g.mu.Lock()
	g.byTag[tag] = append(g.byTag[tag], bytes.Clone(data))
	g.status = append(g.status, status)
	g.n++
	g.mu.Unlock()
}

func (g *tagged) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// coalescing opens a coalescing sender with small buffers and the given
// flush interval.
func coalescing(t *testing.T, mgr *domain.Manager, local string, interval time.Duration, keys *keyLog) *rdm.Endpoint {
	return open(t, mgr, local, rdm.Config{OnData: nop, OnSendCompleted: keys.report,
		Send:     netio.BufferedSendParams{BufferSize: 512, BufferCount: 16},
		Coalesce: &rdm.CoalesceConfig{FlushInterval: interval}})
}

// TestCoalesceToPeers: messages to two peers, interleaved, go into one
// coalescing buffer per peer; each peer decodes exactly its own messages,
// in order per tag, and every buffer is reported OK once.
func TestCoalesceToPeers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			a, b := newTagged(), newTagged()
			rxA := open(t, mgr, p.local, rdm.Config{OnMessage: a.onMessage})
			rxB := open(t, mgr, p.local, rdm.Config{OnMessage: b.onMessage})
			keys := newKeyLog()
			tx := coalescing(t, mgr, p.local, time.Millisecond, keys)
			peerA, err := tx.AddPeer(rxA.Addr())
			require.NoError(t, err)
			peerB, err := tx.AddPeer(rxB.Addr())
			require.NoError(t, err)
			const n = 2000
			for i := range n {
				var msg [8]byte
				binary.LittleEndian.PutUint64(msg[:], uint64(i))
				to, tag := peerA, uint64(1+i%3)
				if i%2 == 1 {
					to, tag = peerB, 10+uint64(i%3)
				}
				st := tx.SendMessageStatus(tag, uint8(i%2), to, msg[:4], msg[4:])
				for deadline := time.Now().Add(10 * time.Second); st == netio.NoResources && time.Now().Before(deadline); {
					time.Sleep(50 * time.Microsecond)
					st = tx.SendMessageStatus(tag, uint8(i%2), to, msg[:4], msg[4:])
				}
				require.Equal(t, netio.OK, st, "message %d", i)
			}
			require.Eventually(t, func() bool { return a.count()+b.count() == n }, 20*time.Second, time.Millisecond)
			for _, g := range []*tagged{a, b} {
				g.mu.Lock()
				for tag, msgs := range g.byTag {
					last := -1
					for _, m := range msgs {
						i := int(binary.LittleEndian.Uint64(m))
						assert.Greater(t, i, last, "tag %d in order", tag)
						last = i
						if g == a {
							assert.Equal(t, uint64(1+i%3), tag, "message %d reached its peer with its tag", i)
						} else {
							assert.Equal(t, 10+uint64(i%3), tag, "message %d reached its peer with its tag", i)
						}
					}
				}
				assert.Len(t, g.status, n/2)
				g.mu.Unlock()
			}
			st := tx.CoalesceStats()
			assert.Equal(t, uint64(n), st.Messages)
			assert.Less(t, st.Buffers, uint64(n/4), "messages shared buffers")
			require.Eventually(t, func() bool { return keys.reports()[netio.OK] == int(st.Buffers) }, 10*time.Second, time.Millisecond,
				"every buffer reported OK")
			time.Sleep(20 * time.Millisecond)
			assert.Equal(t, map[netio.Status]int{netio.OK: int(st.Buffers)}, keys.reports(), "and once")
			assert.Equal(t, uint64(n), rxA.Stats().Decoded+rxB.Stats().Decoded)
		})
	}
}

// reports counts every report by status: a buffered send's key is its
// buffer's ID, which comes back once per send of the buffer.
func (l *keyLog) reports() map[netio.Status]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[netio.Status]int{}
	for _, sts := range l.got {
		for _, st := range sts {
			n[st]++
		}
	}
	return n
}

// TestCoalesceFlushes: a buffer goes out when the next message does not
// fit, when its interval has passed, on Flush and on Close, each counted
// under its cause.
func TestCoalesceFlushes(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			got := newTagged()
			rx := open(t, mgr, p.local, rdm.Config{OnMessage: got.onMessage})
			keys := newKeyLog()
			slow := coalescing(t, mgr, p.local, time.Hour, keys)
			peer, err := slow.AddPeer(rx.Addr())
			require.NoError(t, err)
			msg := make([]byte, 200)
			for range 3 { // 2 fit in 512 bytes with their headers, the 3rd does not
				require.Equal(t, netio.OK, slow.SendMessage(7, msg, peer))
			}
			assert.Equal(t, uint64(1), slow.CoalesceStats().FullFlushes)
			assert.Equal(t, uint64(1), slow.CoalesceStats().Pending)
			require.Equal(t, netio.OK, slow.Flush(peer))
			require.Eventually(t, func() bool { return got.count() == 3 }, 10*time.Second, time.Millisecond)
			assert.Equal(t, uint64(1), slow.CoalesceStats().ExplicitFlushes)
			assert.Equal(t, netio.OK, slow.Flush(peer), "nothing to flush is OK")

			fast := coalescing(t, mgr, p.local, 5*time.Millisecond, newKeyLog())
			fastPeer, err := fast.AddPeer(rx.Addr())
			require.NoError(t, err)
			require.Equal(t, netio.OK, fast.SendMessage(8, []byte("soon"), fastPeer))
			require.Eventually(t, func() bool { return got.count() == 4 }, 10*time.Second, time.Millisecond, "the interval flushed it")
			assert.Equal(t, uint64(1), fast.CoalesceStats().IntervalFlushes)

			require.Equal(t, netio.OK, slow.SendMessage(9, []byte("at close"), peer))
			require.NoError(t, slow.Close())
			assert.Equal(t, uint64(1), slow.CoalesceStats().CloseFlushes)
			assert.Zero(t, slow.CoalesceStats().Dropped)
			byStatus := keys.reports()
			assert.Equal(t, 3, byStatus[netio.OK]+byStatus[netio.Canceled], "each buffer reported once: %v", byStatus)
		})
	}
}

// TestCoalesceRemovePeer: RemovePeer drops what the peer's buffer still
// holds (counted), ends its flusher, and refuses the peer afterwards; the
// other peer goes on.
func TestCoalesceRemovePeer(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	got := newTagged()
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnMessage: got.onMessage})
	other := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	tx := coalescing(t, mgr, "127.0.0.1:0", time.Hour, newKeyLog())
	gone, err := tx.AddPeer(other.Addr())
	require.NoError(t, err)
	stays, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, netio.OK, tx.SendMessage(1, []byte("never sent"), gone))
	}
	require.NoError(t, tx.RemovePeer(gone))
	assert.Equal(t, uint64(3), tx.CoalesceStats().Dropped)
	assert.Equal(t, netio.InvalidArgument, tx.SendMessage(1, []byte("x"), gone))
	assert.Equal(t, netio.InvalidArgument, tx.Flush(gone))
	assert.Equal(t, tx.Stats().Sent, uint64(0), "nothing was posted to the removed peer")
	require.Equal(t, netio.OK, tx.SendMessage(2, []byte("to the other"), stays))
	require.Equal(t, netio.OK, tx.Flush(stays))
	require.Eventually(t, func() bool { return got.count() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, uint64(3), tx.CoalesceStats().Dropped)

	// Churn: a flusher per peer comes and goes with it.
	base := runtime.NumGoroutine()
	for i := range 500 {
		p, err := tx.AddPeer(other.Addr())
		require.NoError(t, err, "cycle %d", i)
		require.NoError(t, tx.RemovePeer(p), "cycle %d", i)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), base+1, "no flusher outlives its peer")
}

// TestCoalesceBadInput: what coalescing cannot take is refused and changes
// nothing; a coalescing endpoint owns its buffers; Close makes it Closed.
func TestCoalesceBadInput(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	plain := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	plainPeer, err := plain.AddPeer(rx.Addr())
	require.NoError(t, err)
	assert.Equal(t, netio.InvalidArgument, plain.SendMessage(1, []byte("x"), plainPeer), "not coalescing")
	assert.Equal(t, netio.InvalidArgument, plain.Flush(plainPeer), "not coalescing")

	tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop,
		Send: netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}, Coalesce: &rdm.CoalesceConfig{}})
	require.NoError(t, err)
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	assert.Nil(t, tx.GetBuffer(), "a coalescing endpoint owns its buffers")
	buf := plain.GetBuffer()
	require.NotNil(t, buf)
	assert.Equal(t, netio.InvalidArgument, tx.SendBuffer(buf, 1, peer))
	_, st := tx.ReleaseBuffer(0)
	assert.Equal(t, netio.InvalidArgument, st)
	_, st = plain.ReleaseBuffer(buf.ID())
	require.Equal(t, netio.OK, st)
	assert.Equal(t, netio.InvalidArgument, tx.SendMessage(1, make([]byte, 256), peer), "larger than a buffer")
	assert.Equal(t, netio.InvalidArgument, tx.SendMessageV(1, [][]byte{make([]byte, coalesce.MaxPayload), {1}}, peer))
	assert.Equal(t, netio.InvalidArgument, tx.SendMessage(1, []byte("x"), rdm.Peer{}), "the zero peer")
	assert.Equal(t, netio.InvalidArgument, tx.Flush(rdm.Peer{}))
	assert.Zero(t, tx.CoalesceStats().Messages, "nothing taken")

	for name, cfg := range map[string]rdm.Config{
		"negative interval":    {OnData: nop, Coalesce: &rdm.CoalesceConfig{FlushInterval: -1}},
		"OnData and OnMessage": {OnData: nop, OnMessage: func(*rdm.Endpoint, rdm.Peer, uint64, []byte, uint8) {}},
	} {
		bad, err := rdm.Open(mgr, "127.0.0.1:0", cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, bad, name)
	}
	require.NoError(t, tx.Close())
	assert.Equal(t, netio.Closed, tx.SendMessage(1, []byte("x"), peer))
	assert.Equal(t, netio.Closed, tx.Flush(peer))
}

// TestMalformedCoalescedBuffer: a buffer that breaks the format delivers its
// valid prefix and is reported, counted, and the receiver goes on.
func TestMalformedCoalescedBuffer(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	got := newTagged()
	errs := make(chan error, 4)
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnMessage: got.onMessage,
		OnReceiveError: func(_ *rdm.Endpoint, err error) { errs <- err }})
	tx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	var enc coalesce.Encoder
	raw := make([]byte, 64)
	enc.Reset(raw)
	require.NoError(t, enc.Append(3, 0, []byte("ok")))
	send(t, tx, rx.Addr(), append(raw[:enc.Len():enc.Len()], 0xff, 0xff)) // a truncated header word after it
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, netio.ErrFailed)
	case <-time.After(10 * time.Second):
		t.Fatal("no receive error")
	}
	assert.Equal(t, 1, got.count(), "the valid prefix")
	assert.Equal(t, uint64(1), rx.Stats().ReceiveErrors)
}

// TestCoalesceStatsNeverGoBack: CoalesceStats read while peers with
// messages come and go, and while the endpoint closes, never loses a
// removed peer's counts from one reading: the totals only grow.
func TestCoalesceStatsNeverGoBack(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			other := open(t, mgr, p.local, rdm.Config{OnData: nop})
			tx, err := rdm.Open(mgr, p.local, rdm.Config{OnData: nop,
				Send:     netio.BufferedSendParams{BufferSize: 512, BufferCount: 16},
				Coalesce: &rdm.CoalesceConfig{FlushInterval: time.Hour}})
			require.NoError(t, err)
			stop := make(chan struct{})
			var backwards, reads int
			done := make(chan struct{})
			go func() {
				defer close(done)
				var last uint64
				for {
					select {
					case <-stop:
						return
					default:
					}
					if m := tx.CoalesceStats().Messages; m < last {
						backwards++
					} else {
						last = m
					}
					reads++
					runtime.Gosched() // read as often as the others let it, without holding a P of two
				}
			}()
			const rounds = 300
			for i := range rounds {
				peer, err := tx.AddPeer(other.Addr())
				require.NoError(t, err, "round %d", i)
				require.Equal(t, netio.OK, tx.SendMessage(1, []byte("dropped at removal"), peer))
				require.NoError(t, tx.RemovePeer(peer), "round %d", i)
			}
			last, err := tx.AddPeer(other.Addr())
			require.NoError(t, err)
			require.Equal(t, netio.OK, tx.SendMessage(1, []byte("flushed at close"), last))
			require.NoError(t, tx.Close())
			close(stop)
			<-done
			assert.Zero(t, backwards, "readings that went back, of %d", reads)
			assert.Equal(t, uint64(rounds+1), tx.CoalesceStats().Messages)
		})
	}
}
