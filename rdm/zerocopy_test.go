package rdm_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// keyLog records the keys a sender reported, and how often.
type keyLog struct {
	mu  sync.Mutex
	got map[uint64][]netio.Status
}

func newKeyLog() *keyLog { return &keyLog{got: map[uint64][]netio.Status{}} }

func (l *keyLog) report(key uint64, st netio.Status) {
	l.mu.Lock()
	l.got[key] = append(l.got[key], st)
	l.mu.Unlock()
}

// count returns the keys reported at least once.
func (l *keyLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// once checks that each of keys was reported exactly once and returns the
// statuses by count. With count it also shows no other key was reported.
func (l *keyLog) once(t *testing.T, keys []uint64) map[netio.Status]int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	byStatus := map[netio.Status]int{}
	for _, k := range keys {
		if assert.Len(t, l.got[k], 1, "key %d reported once", k) {
			byStatus[l.got[k][0]]++
		}
	}
	return byStatus
}

// TestZeroCopySend: header slot + the caller's data (Go memory in one or
// several pieces, and a declared region) reach the peer as one message
// each, exactly as sent, and every key is reported OK once.
func TestZeroCopySend(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			region := bytes.Repeat([]byte("region!"), 1000)
			keys := newKeyLog()
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop,
				ZeroCopy: &rdm.ZeroCopyConfig{HeaderCount: 8, Region: region, OnSendCompleted: keys.report}})
			peer, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			const n = 300
			var want [][]byte
			var sent []uint64
			for i := range n {
				header := []byte(fmt.Sprintf("hdr %03d|", i))
				data := bytes.Repeat([]byte{byte(i)}, 100+i)
				var st netio.Status
				deadline := time.Now().Add(10 * time.Second)
				for {
					switch i % 3 {
					case 0:
						st = tx.SendZeroCopy(header, data, uint64(i), peer)
					case 1:
						st = tx.SendZeroCopyV(header, [][]byte{data[:10], data[10:]}, uint64(i), peer)
					default:
						st = tx.SendZeroCopy(header, region[i:i+64], uint64(i), peer)
					}
					if st != netio.NoResources || time.Now().After(deadline) {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				require.Equal(t, netio.OK, st, "send %d", i)
				if i%3 == 2 {
					data = region[i : i+64]
				}
				want, sent = append(want, append(header, data...)), append(sent, uint64(i))
				// The data must not change until the key is reported: the
				// test does not touch it again.
			}
			require.Eventually(t, func() bool { return in.count() == n && keys.count() == n }, 20*time.Second, time.Millisecond)
			assert.Equal(t, map[netio.Status]int{netio.OK: n}, keys.once(t, sent))
			assert.Equal(t, n, keys.count(), "no key reported that was not handed over")
			in.mu.Lock()
			defer in.mu.Unlock()
			got := map[string]bool{}
			for _, m := range in.msgs {
				got[string(m)] = true
			}
			for i, w := range want {
				assert.True(t, got[string(w)], "message %d arrived whole", i)
			}
			assert.Empty(t, tx.PendingZeroCopy())
			assert.Equal(t, uint64(n), tx.Stats().Completed)
		})
	}
}

// TestZeroCopyBadInput: what a zero-copy send cannot take is refused and
// changes nothing; after Close it is Closed.
func TestZeroCopyBadInput(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	plain := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	e, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop, ZeroCopy: &rdm.ZeroCopyConfig{HeaderSize: 16}})
	require.NoError(t, err)
	peer, err := e.AddPeer(rx.Addr())
	require.NoError(t, err)
	plainPeer, err := plain.AddPeer(rx.Addr())
	require.NoError(t, err)
	gone, err := e.AddPeer(plain.Addr())
	require.NoError(t, err)
	require.NoError(t, e.RemovePeer(gone))
	data := []byte("data")
	assert.Equal(t, netio.InvalidArgument, plain.SendZeroCopy(nil, data, 1, plainPeer), "no ZeroCopy config")
	assert.Equal(t, netio.InvalidArgument, e.SendZeroCopy(make([]byte, 17), data, 1, peer), "header larger than a slot")
	assert.Equal(t, netio.InvalidArgument, e.SendZeroCopy(nil, data, 1, rdm.Peer{}), "the zero peer")
	assert.Equal(t, netio.InvalidArgument, e.SendZeroCopy(nil, data, 1, gone), "a removed peer")
	assert.Equal(t, netio.InvalidArgument, e.SendZeroCopyV(nil, make([][]byte, e.MaxPieces()+1), 1, peer), "too many pieces")
	assert.Zero(t, e.Stats().Sent, "nothing was sent")
	assert.Empty(t, e.PendingZeroCopy())
	assert.Equal(t, 128, e.NumAvailableHeaders(), "every header slot free")
	for name, cfg := range map[string]rdm.ZeroCopyConfig{
		"negative header size": {HeaderSize: -1},
		"too many headers":     {HeaderCount: netio.MaxBufferCount + 1},
		"empty region":         {Region: []byte{}},
	} {
		bad, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop, ZeroCopy: &cfg})
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, bad, name)
	}
	require.NoError(t, e.Close())
	assert.Equal(t, netio.Closed, e.SendZeroCopy(nil, data, 1, peer))
	assert.Equal(t, netio.InvalidArgument, e.SendZeroCopyV(nil, make([][]byte, e.MaxPieces()+1), 1, peer), "too many pieces, closed or not")
}

// TestZeroCopyCloseCancelsPending: zero-copy sends to a peer nobody
// listens at are reported once each, Canceled or Failed, never OK, when
// the endpoint closes.
func TestZeroCopyCloseCancelsPending(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	keys := newKeyLog()
	e, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop,
		ZeroCopy: &rdm.ZeroCopyConfig{HeaderCount: 8, OnSendCompleted: keys.report}})
	require.NoError(t, err)
	peer, err := e.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	data := make([]byte, 4096)
	var sent []uint64
	for k := uint64(0); e.SendZeroCopy([]byte("h"), data, k, peer) == netio.OK; k++ {
		sent = append(sent, k)
	}
	require.NotEmpty(t, sent)
	require.NoError(t, e.Close())
	byStatus := keys.once(t, sent)
	assert.Equal(t, len(sent), keys.count())
	assert.Zero(t, byStatus[netio.OK], "%v", byStatus)
	assert.Equal(t, uint64(len(sent)), e.Stats().Failed)
}
