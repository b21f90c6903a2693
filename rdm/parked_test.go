package rdm_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/rdm"
)

// refuse has the provider refuse (EAGAIN, as ofi_rxm does for a peer that
// is not listening) every send to the peer in *dead, on every provider.
func refuse(dead *atomic.Value) func(rdm.LanePost) rdm.LanePost {
	return func(post rdm.LanePost) rdm.LanePost {
		return func(ep *fabric.Endpoint, key uint32, n int, to rdm.Peer) fabric.Errno {
			if p, _ := dead.Load().(rdm.Peer); p == to {
				return fabric.EAGAIN
			}
			return post(ep, key, n, to)
		}
	}
}

// deadPeer adds a peer to e, 127.0.0.1:1, to which the provider refuses
// every send for now (refuse), and returns it.
func deadPeer(t *testing.T, e *rdm.Endpoint) rdm.Peer {
	t.Helper()
	var dead atomic.Value
	rdm.WrapLanePost(e, refuse(&dead))
	peer, err := e.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	dead.Store(peer)
	return peer
}

// sendOne sends a buffer of 8 bytes to peer.
func sendOne(t *testing.T, e *rdm.Endpoint, to rdm.Peer) {
	t.Helper()
	buf := e.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, e.SendBuffer(buf, 8, to))
}

// TestCloseFromParkedFailure: Close called from the completion callback of
// a parked send that fails, after PeerTimeout or by RemovePeer, returns
// and frees everything; the report must not run while the poller holds
// the post guard that Close's teardown takes.
func TestCloseFromParkedFailure(t *testing.T) {
	for _, p := range providers {
		for _, how := range []string{"timeout", "RemovePeer"} {
			t.Run(p.name+"/"+how, func(t *testing.T) {
				mgr := openDomain(t, p.name)
				var tx *rdm.Endpoint
				closed := make(chan error, 1)
				timeout := 100 * time.Millisecond
				if how == "RemovePeer" {
					timeout = time.Hour
				}
				tx, err := rdm.Open(mgr, p.local, rdm.Config{OnData: nop, PeerTimeout: timeout,
					OnSendCompleted: func(_ uint64, st netio.Status) {
						if st == netio.Failed {
							closed <- tx.Close()
						}
					}})
				require.NoError(t, err)
				peer := deadPeer(t, tx)
				sendOne(t, tx, peer)
				if how == "RemovePeer" {
					removed := make(chan error, 1)
					go func() { removed <- tx.RemovePeer(peer) }()
					select {
					case err := <-removed:
						assert.NoError(t, err)
					case <-time.After(20 * time.Second):
						require.FailNow(t, "RemovePeer did not return: the poller deadlocked")
					}
				}
				select {
				case err := <-closed:
					assert.NoError(t, err)
				case <-time.After(20 * time.Second):
					require.FailNow(t, "Close from the callback did not return: the poller deadlocked")
				}
				assert.NoError(t, tx.Close())
			})
		}
	}
}

// TestRemovePeerFromTimeoutCallback: a callback of a lane that timed out
// removes its peer; the peer added next in that slot is not taken for
// unreachable: its first sends, refused once while "connecting" (as
// ofi_rxm does), wait and go through.
func TestRemovePeerFromTimeoutCallback(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			var dead atomic.Value
			var tx *rdm.Endpoint
			results := make(chan netio.Status, 64)
			removed := make(chan error, 1)
			tx = open(t, mgr, p.local, rdm.Config{OnData: nop, PeerTimeout: 100 * time.Millisecond,
				OnSendCompleted: func(_ uint64, st netio.Status) {
					if d, _ := dead.Load().(rdm.Peer); d.Valid() && st == netio.Failed {
						dead.Store(rdm.Peer{})
						removed <- tx.RemovePeer(d)
						return
					}
					results <- st
				}})
			var mu sync.Mutex
			tried := map[uint32]bool{}
			rdm.WrapLanePost(tx, func(post rdm.LanePost) rdm.LanePost {
				inner := refuse(&dead)(post)
				return func(ep *fabric.Endpoint, key uint32, n int, to rdm.Peer) fabric.Errno {
					mu.Lock()
					first := !tried[key]
					tried[key] = true
					mu.Unlock()
					if first {
						return fabric.EAGAIN // "connecting"
					}
					return inner(ep, key, n, to)
				}
			})
			peer, err := tx.AddPeer("127.0.0.1:1")
			require.NoError(t, err)
			dead.Store(peer)
			sendOne(t, tx, peer)
			select {
			case err := <-removed:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				require.FailNow(t, "the lane did not time out")
			}
			again, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			const n = 20
			for range n {
				mu.Lock()
				clear(tried)
				mu.Unlock()
				sendOne(t, tx, again)
				select {
				case st := <-results:
					assert.Equal(t, netio.OK, st, "a send to the slot's new peer")
				case <-time.After(20 * time.Second):
					require.FailNow(t, "no completion")
				}
			}
			require.Eventually(t, func() bool { return in.count() == n }, 10*time.Second, time.Millisecond)
		})
	}
}

// TestDrainDoesNotStarveThePoller: producers that refill the hand-off
// queue as fast as the poller posts from it (injects refused at once, as
// sockets does to a dead peer) must not keep the poller in one drain: an
// AddPeer waiting for the poller gets its turn long before they stop (the
// producer waits for it to begin, then stops by itself after limit injects).
func TestDrainDoesNotStarveThePoller(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			rx := open(t, mgr, p.local, rdm.Config{OnData: nop})
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop})
			peer, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			const limit, paused = 20000, 10
			var produced atomic.Int64
			adding := make(chan struct{}) // the test is about to AddPeer
			var stop atomic.Bool
			refill, quit := make(chan chan struct{}), make(chan struct{})
			rdm.WrapHandOffPost(tx, func(post func(*fabric.Endpoint, uint32, int) fabric.Errno) func(*fabric.Endpoint, uint32, int) fabric.Errno {
				return func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
					if !rdm.IsInjectKey(key) || stop.Load() {
						return post(ep, key, n)
					}
					done := make(chan struct{})
					select {
					case refill <- done: // the producer queues the next inject, then says so
						<-done
					case <-quit:
					}
					return fabric.ECONNREFUSED
				}
			})
			producerDone := make(chan struct{})
			go func() {
				defer close(producerDone)
				for {
					select {
					case done := <-refill:
						if produced.Load() == paused {
							<-adding
						}
						if produced.Add(1) < limit && !stop.Load() {
							assert.Equal(t, netio.OK, tx.Inject([]byte("x"), peer))
						} else {
							stop.Store(true)
						}
						close(done)
					case <-quit:
						return
					}
				}
			}()
			require.Equal(t, netio.OK, tx.Inject([]byte("x"), peer))
			close(adding)
			_, err = tx.AddPeer(rx.Addr()) // waits for the poller
			require.NoError(t, err)
			atAdd := produced.Load()
			stop.Store(true)
			assert.Less(t, atAdd, int64(limit), "AddPeer waited until the producer gave up: the drain starved the poller")
			close(quit)
			<-producerDone
		})
	}
}
