package rdm_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/rdm"
)

// streams checks messages of many streams, each in the testpattern's
// header format, which carries the sender's stream and sequence number:
// order and completeness are checked per stream whatever the provider can
// say about sources. Messages of one stream may not come in order on
// every provider (a provider without FI_ORDER_SAS), so each sequence
// number is counted once, and duplicates and corrupt messages are errors.
type streams struct {
	pat *testpattern.Pattern

	mu   sync.Mutex
	seen map[uint64]map[uint64]bool
	errs []error
}

func newStreams(size int) *streams {
	return &streams{pat: testpattern.New(size, testpattern.WithHeader()), seen: map[uint64]map[uint64]bool{}}
}

func (s *streams) onData(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
	h, ok := testpattern.ParseHeader(data)
	var err error
	if !ok {
		err = fmt.Errorf("a message without a header (%d bytes)", len(data))
	} else {
		err = s.pat.Check(data, h.Stream, h.Seq)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs = append(s.errs, err)
		return
	}
	if s.seen[h.Stream] == nil {
		s.seen[h.Stream] = map[uint64]bool{}
	}
	if s.seen[h.Stream][h.Seq] {
		s.errs = append(s.errs, fmt.Errorf("stream %d message %d twice", h.Stream, h.Seq))
	}
	s.seen[h.Stream][h.Seq] = true
}

// complete reports whether every stream in ids has count messages.
func (s *streams) complete(ids []uint64, count int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if len(s.seen[id]) != count {
			return false
		}
	}
	return true
}

// stream sends count messages of stream id to peer from e, retrying while
// the provider is not ready, and waits for their completions. Errors go to
// errs: it runs in its own goroutine.
func stream(e *rdm.Endpoint, to rdm.Peer, pat *testpattern.Pattern, id uint64, count, size int, errs chan<- error) {
	deadline := time.Now().Add(60 * time.Second)
	for seq := range uint64(count) {
		var buf = e.GetBuffer()
		for buf == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Microsecond)
			buf = e.GetBuffer()
		}
		if buf == nil {
			errs <- fmt.Errorf("stream %d: no buffer for message %d", id, seq)
			return
		}
		pat.Fill(buf.Bytes()[:size], id, seq)
		st := e.SendBuffer(buf, size, to)
		for st == netio.NoResources && time.Now().Before(deadline) {
			time.Sleep(50 * time.Microsecond)
			st = e.SendBuffer(buf, size, to)
		}
		if st != netio.OK {
			errs <- fmt.Errorf("stream %d message %d: %v", id, seq, st)
			return
		}
	}
	errs <- nil
}

// TestManySendersOneReceiver: 16 endpoints feed one; every stream arrives
// whole and intact.
func TestManySendersOneReceiver(t *testing.T) {
	const senders, count, size = 16, 200, 512
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if !manyHere(t, p.name) {
				return
			}
			mgr := openDomain(t, p.name)
			got := newStreams(size)
			rx := open(t, mgr, p.local, rdm.Config{OnData: got.onData,
				Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 256}})
			errs := make(chan error, senders)
			ids := make([]uint64, senders)
			for i := range senders {
				ids[i] = uint64(i + 1)
				tx := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
					Send: netio.BufferedSendParams{BufferSize: size, BufferCount: 16}})
				peer, err := tx.AddPeer(rx.Addr())
				require.NoError(t, err)
				go stream(tx, peer, got.pat, ids[i], count, size, errs)
			}
			for range senders {
				assert.NoError(t, <-errs)
			}
			require.Eventually(t, func() bool { return got.complete(ids, count) }, 30*time.Second, time.Millisecond,
				"every message of every stream")
			got.mu.Lock()
			assert.Empty(t, got.errs)
			got.mu.Unlock()
			// A state OnData set says nothing of when the count is made:
			// wait for the count itself.
			assert.Eventually(t, func() bool { return rx.Stats().Received == senders*count }, 10*time.Second, time.Millisecond,
				"Received counts every message once")
		})
	}
}

// TestOneSenderManyReceivers: one endpoint feeds 16; every receiver gets
// its stream whole and intact, and every send is reported OK once.
func TestOneSenderManyReceivers(t *testing.T) {
	const receivers, count, size = 16, 100, 512
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if !manyHere(t, p.name) {
				return
			}
			mgr := openDomain(t, p.name)
			var ok, other atomic.Int64
			var sinks []*streams
			var addrs []string
			var rxs []*rdm.Endpoint
			for range receivers {
				got := newStreams(size)
				sinks = append(sinks, got)
				rx := open(t, mgr, p.local, rdm.Config{OnData: got.onData,
					Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 128}})
				addrs, rxs = append(addrs, rx.Addr()), append(rxs, rx)
			}
			tx := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
				Send: netio.BufferedSendParams{BufferSize: size, BufferCount: 64},
				OnSendCompleted: func(_ uint64, st netio.Status) {
					if st == netio.OK {
						ok.Add(1)
					} else {
						other.Add(1)
					}
				}})
			for _, rx := range rxs { // each receiver knows the sender
				_, err := rx.AddPeer(tx.Addr())
				require.NoError(t, err)
			}
			errs := make(chan error, receivers)
			for i, addr := range addrs {
				peer, err := tx.AddPeer(addr)
				require.NoError(t, err)
				go stream(tx, peer, sinks[i].pat, uint64(i+1), count, size, errs)
			}
			for range receivers {
				assert.NoError(t, <-errs)
			}
			for i, got := range sinks {
				require.Eventually(t, func() bool { return got.complete([]uint64{uint64(i + 1)}, count) },
					30*time.Second, time.Millisecond, "receiver %d", i)
				got.mu.Lock()
				assert.Empty(t, got.errs, "receiver %d", i)
				got.mu.Unlock()
			}
			require.Eventually(t, func() bool { return ok.Load()+other.Load() == receivers*count }, 10*time.Second, time.Millisecond)
			assert.Equal(t, int64(receivers*count), ok.Load(), "every send reported OK once")
			assert.Equal(t, 16, tx.Peers())
		})
	}
}

// TestPeerChurn: 10,000 add/remove cycles leave the address vector, the
// registrations and the goroutines as they were.
func TestPeerChurn(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			rx := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
			e := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
			regs, goroutines := mgr.Stats().Registrations, runtime.NumGoroutine()
			var last rdm.Peer
			for i := range 10000 {
				peer, err := e.AddPeer(rx.Addr())
				require.NoError(t, err, "cycle %d", i)
				require.NoError(t, e.RemovePeer(peer), "cycle %d", i)
				assert.NotEqual(t, last, peer, "a new handle each time")
				last = peer
			}
			assert.Zero(t, e.Peers())
			assert.Equal(t, regs, mgr.Stats().Registrations)
			assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines+1)
			assert.Error(t, e.RemovePeer(last), "removed already")
			buf := e.GetBuffer()
			require.NotNil(t, buf)
			assert.Equal(t, netio.InvalidArgument, e.SendBuffer(buf, 1, last), "a removed peer is refused")
			_, st := e.ReleaseBuffer(buf.ID())
			assert.Equal(t, netio.OK, st)
		})
	}
}

// manyHere reports whether a test of many endpoints streaming in one
// process runs here. On udp;ofi_rxd it runs in a child process instead
// (and the parent only checks the child): that shape was recorded
// crashing libfabric 1.17 (SIGSEGV inside fi_cq_readfrom) on 2026-11-25,
// and a crash would take later tests of other providers down with it. It
// ran clean in 54 of 54 runs since (docs/providers.md, "Threads").
func manyHere(t *testing.T, provider string) bool {
	t.Helper()
	if provider != "udp;ofi_rxd" {
		return true
	}
	return inSubprocess(t, "many", 3*time.Minute)
}
