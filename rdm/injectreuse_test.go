package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/rdm"
)

// blockPoller opens, in mgr, an endpoint whose OnData blocks until the
// returned release, and has an endpoint of another domain send it a
// message: it returns once mgr's poller waits in that OnData (so every
// send of mgr's endpoints is queued until release), and fails the test if
// the poller does not get there.
func blockPoller(t *testing.T, mgr *domain.Manager, provider, local string) (release func()) {
	t.Helper()
	entered, enter := gate()
	hold, release := gate()
	blocker := open(t, mgr, local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {
		enter()
		<-hold
	}})
	t.Cleanup(release) // registered after blocker's Close, so run before it
	poke := open(t, openDomain(t, provider), local, rdm.Config{OnData: nop})
	send(t, poke, blocker.Addr(), []byte("block"))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		require.Fail(t, "the poller did not get into the blocking OnData")
	}
	return release
}

// stuckInjects is a sender whose last inject to a stalled receiver is
// tracked and stuck: see stickInjects.
type stuckInjects struct {
	tx, rx  *rdm.Endpoint
	peer    rdm.Peer
	got     *atomic.Int64 // 8-byte messages rx received
	unstall func()
	dying   *atomic.Bool // die: rx closes in its stalled OnData, its data unread
}

// die unstalls rx into closing its endpoint from the stalled OnData, with
// the data in its socket unread: the kernel resets the connection, as for
// a receiver that died.
func (s stuckInjects) die() {
	s.dying.Store(true)
	s.unstall()
}

// stickInjects opens, on tcp;ofi_rxm, a receiver whose OnData stalls and
// a sender (cfg, with InjectLinger -1 unless set) that fills the
// receiver's socket with buffered sends, then, its poller held, queues n
// injects to it: the poller posts the first n-1 untracked (taken, counted
// Completed) and the last tracked, which stays in flight behind the full
// socket (InjectConfirmsHeld 1) until unstall.
func stickInjects(t *testing.T, n int, cfg rdm.Config) stuckInjects {
	t.Helper()
	const provider, local = "tcp;ofi_rxm", "127.0.0.1:0"
	s := stuckInjects{got: &atomic.Int64{}, dying: &atomic.Bool{}}
	stall, unstall := gate()
	s.unstall = unstall
	s.rx = open(t, openDomain(t, provider), local, rdm.Config{OnData: func(e *rdm.Endpoint, _ rdm.Peer, data []byte) {
		if string(data) != "connect" {
			<-stall // rx's poller waits here, bounded by the test
			if s.dying.Load() {
				assert.NoError(t, e.Close())
				return
			}
		}
		if len(data) == 8 {
			s.got.Add(1)
		}
	}})
	shared := openDomain(t, provider)
	cfg.OnData = nop
	if cfg.InjectLinger == 0 {
		cfg.InjectLinger = -1
	}
	var err error
	s.tx, err = rdm.Open(shared, local, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.tx.Close()) })
	t.Cleanup(unstall) // before tx closes, so that a failing test does not hang
	send(t, s.tx, s.rx.Addr(), []byte("connect"))
	s.peer, err = s.tx.AddPeer(s.rx.Addr())
	require.NoError(t, err)
	require.True(t, fillPeer(t, s.tx, s.peer), "rx's socket fills")
	release := blockPoller(t, shared, provider, local)
	base := s.tx.Stats().Completed
	msg := make([]byte, 8)
	for i := range n {
		require.Equal(t, netio.OK, s.tx.Inject(msg, s.peer), "inject %d", i)
	}
	release()
	if !assert.Eventually(t, func() bool {
		st := s.tx.Stats()
		return st.Completed == base+uint64(n-1) && st.InjectConfirmsHeld == 1
	}, 10*time.Second, time.Millisecond, "n-1 injects taken untracked, the last tracked and in flight") {
		t.Fatalf("completed before the injects %d; now %+v", base, s.tx.Stats())
	}
	return s
}

// TestRemovedPeersCoveredInjectsCountWhenItsConfirmIsCanceled: RemovePeer
// leaves out of InjectsUnconfirmed the injects the peer's tracked inject
// in flight would confirm; Close cancels that inject, and then they count.
func TestRemovedPeersCoveredInjectsCountWhenItsConfirmIsCanceled(t *testing.T) {
	const n = 10
	s := stickInjects(t, n, rdm.Config{})
	require.NoError(t, s.tx.RemovePeer(s.peer))
	assert.Zero(t, s.tx.Stats().InjectsUnconfirmed, "the tracked inject in flight covers the ones before it")
	require.NoError(t, s.tx.Close())
	st := s.tx.Stats()
	assert.Equal(t, uint64(n-1), st.InjectsUnconfirmed, "its cancel leaves them unconfirmed")
	assert.Zero(t, st.InjectConfirmsHeld)
}

// TestRemovePeerTwiceInAReusedSlot: a peer added into the slot of a
// removed one whose tracked inject is still in flight starts its counts
// afresh: removing it counts its own untracked injects taken, less those
// its own tracked inject in flight covers, and nothing of the old peer's
// (it used to subtract the old peer's covered injects from its own and
// wrap to about 1.8e19). Close cancels both tracked injects: then every
// untracked inject taken counts, each once.
func TestRemovePeerTwiceInAReusedSlot(t *testing.T) {
	const n = 10
	s := stickInjects(t, n, rdm.Config{})
	require.NoError(t, s.tx.RemovePeer(s.peer))
	require.Zero(t, s.tx.Stats().InjectsUnconfirmed)
	again, err := s.tx.AddPeer(s.rx.Addr())
	require.NoError(t, err)
	require.Equal(t, rdm.PeerSlot(s.peer), rdm.PeerSlot(again), "the slot is reused")
	base := s.tx.Stats().Completed
	msg := make([]byte, 8)
	for range 5 {
		require.Equal(t, netio.OK, injectWithin(s.tx, msg, again, 10*time.Second))
	}
	require.NoError(t, s.tx.RemovePeer(again))
	st := s.tx.Stats() // rx is stalled: no tracked inject completed since base
	taken := st.Completed - base
	t.Logf("the new peer's untracked injects taken: %d; %+v", taken, st)
	assert.LessOrEqual(t, taken, uint64(5))
	assert.LessOrEqual(t, st.InjectsUnconfirmed, taken, "the new peer's own injects at most, nothing of the old one's")
	require.NoError(t, s.tx.Close())
	assert.Equal(t, taken+n-1, s.tx.Stats().InjectsUnconfirmed, "every untracked inject taken, once the tracked ones are canceled")
}

// TestReusedSlotsPeerIsNotDelayed: a healthy peer added into the slot of a
// removed one whose tracked inject is stuck does not wait for that inject:
// its lone injects go tracked at once and arrive (they used to wait half
// PeerTimeout each, here half an hour). Every send buffer is held by the
// stalled peer, so the first inject is the new peer's first send (ofi_rxm
// connects, refusing it meanwhile).
func TestReusedSlotsPeerIsNotDelayed(t *testing.T) {
	s := stickInjects(t, 10, rdm.Config{PeerTimeout: time.Hour})
	require.NoError(t, s.tx.RemovePeer(s.peer))
	var got atomic.Int64
	healthy := open(t, openDomain(t, "tcp;ofi_rxm"), "127.0.0.1:0", rdm.Config{OnData: counter(&got)})
	p, err := s.tx.AddPeer(healthy.Addr())
	require.NoError(t, err)
	require.Equal(t, rdm.PeerSlot(s.peer), rdm.PeerSlot(p), "the slot is reused")
	msg := make([]byte, 8)
	for i := range 3 {
		require.Equal(t, netio.OK, s.tx.Inject(msg, p))
		require.Eventually(t, func() bool { return got.Load() == int64(i+1) }, 10*time.Second, time.Millisecond, "inject %d arrives", i)
	}
	require.Eventually(t, func() bool { return s.tx.Stats().InjectConfirmsHeld == 1 }, 10*time.Second, time.Millisecond,
		"the new peer's tracked injects completed; the old one's is still held")
	require.NoError(t, s.tx.Close())
	assert.Equal(t, uint64(9), s.tx.Stats().InjectsUnconfirmed, "the old peer's, canceled; none of the new peer's")
}

// TestCloseWaitsForTrackedInject: Close waits (InjectLinger) for a tracked
// inject in flight though no untracked one is unconfirmed: released
// meanwhile, the stalled receiver gets it, and it counts Completed, not
// Failed (Close used to return at once and cancel it).
func TestCloseWaitsForTrackedInject(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "sockets" {
				// sockets mostly takes every send to the stalled peer (no
				// fill in 3 s); when it did stop taking them (1 of 3
				// runs), none of the 64 buffered sends completed in the
				// 30 s after the release either: a stall of the
				// provider's, which no linger can wait out.
				t.Skip("sockets: sends to a peer that stalled with a full socket did not complete after its release")
			}
			stall, release := gate()
			var got atomic.Int64
			rx := open(t, openDomain(t, p.name), p.local, rdm.Config{OnData: func(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
				if string(data) != "connect" {
					<-stall
				}
				if len(data) == 8 {
					got.Add(1)
				}
			}})
			tx, err := rdm.Open(openDomain(t, p.name), p.local, rdm.Config{OnData: nop, InjectLinger: 30 * time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, tx.Close()) })
			t.Cleanup(release)
			send(t, tx, rx.Addr(), []byte("connect"))
			peer, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			if !fillPeer(t, tx, peer) {
				release()
				t.Skip(p.name + " took every send to the stalled peer: it cannot hold a send")
			}
			require.Equal(t, netio.OK, tx.Inject(make([]byte, 8), peer))
			if !assert.Eventually(t, func() bool { return tx.Stats().InjectConfirmsHeld == 1 }, 10*time.Second, time.Millisecond,
				"the inject is tracked and in flight") {
				t.Fatalf("%+v", tx.Stats())
			}
			closed := make(chan error, 1)
			go func() { closed <- tx.Close() }()
			time.Sleep(300 * time.Millisecond) // Close waits meanwhile
			release()
			select {
			case err := <-closed:
				assert.NoError(t, err)
			case <-time.After(40 * time.Second):
				t.Fatal("Close did not return")
			}
			s := tx.Stats()
			assert.Zero(t, s.Failed, "nothing canceled: %+v", s)
			assert.Equal(t, s.Sent, s.Completed)
			assert.Zero(t, s.InjectsUnconfirmed)
			assert.Eventually(t, func() bool { return got.Load() == 1 }, 10*time.Second, time.Millisecond, "the inject arrived")
		})
	}
}

// TestRefusedTrackedSendFallsBackToInject: when the provider refuses a
// tracked inject's fi_send for now (ofi_rxm out of transmit buffers), the
// inject goes untracked with fi_inject instead of waiting parked for the
// fi_send (here refused for ever: it never went out).
func TestRefusedTrackedSendFallsBackToInject(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	var got atomic.Int64
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: counter(&got)})
	tx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop, InjectLinger: -1, PeerTimeout: time.Hour})
	send(t, tx, rx.Addr(), []byte("connect"))
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tx.Stats().Completed == 1 }, 10*time.Second, time.Millisecond)
	rdm.RefuseTrackedSends(tx, fabric.EAGAIN)
	require.Equal(t, netio.OK, tx.Inject(make([]byte, 8), peer))
	require.Eventually(t, func() bool { return got.Load() == 1 }, 10*time.Second, time.Millisecond, "the inject went out")
	require.NoError(t, tx.Close())
	s := tx.Stats()
	assert.Equal(t, uint64(2), s.Completed)
	assert.Equal(t, uint64(1), s.InjectsUnconfirmed, "untracked, and nothing after it confirmed it")
}

// TestEvery33rdInjectIsTracked: with 40 injects to one peer queued at once
// and the last one failed before the provider sees it, the 33rd in a row
// is tracked and its completion confirms the 32 before it: fewer than 33
// are left unconfirmed (all 39 taken were, without the rule).
func TestEvery33rdInjectIsTracked(t *testing.T) {
	const provider, local, n = "tcp;ofi_rxm", "127.0.0.1:0", 40
	shared := openDomain(t, provider)
	var got atomic.Int64
	rx := open(t, openDomain(t, provider), local, rdm.Config{OnData: counter(&got)})
	tx, err := rdm.Open(shared, local, rdm.Config{OnData: nop, InjectLinger: -1, InjectQueue: n})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tx.Close()) })
	send(t, tx, rx.Addr(), []byte("connect"))
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tx.Stats().Completed == 1 }, 10*time.Second, time.Millisecond)
	var posts atomic.Int64
	rdm.WrapLanePost(tx, func(post rdm.LanePost) rdm.LanePost {
		return func(ep *fabric.Endpoint, key uint32, m int, to rdm.Peer) fabric.Errno {
			if rdm.IsInjectKey(key) && posts.Add(1) == n {
				return fabric.EINVAL // the last one fails: nothing tracks it
			}
			return post(ep, key, m, to)
		}
	})
	release := blockPoller(t, shared, provider, local)
	msg := make([]byte, 8)
	for i := range n {
		require.Equal(t, netio.OK, tx.Inject(msg, peer), "inject %d", i)
	}
	release()
	require.Eventually(t, func() bool {
		s := tx.Stats()
		return s.Completed+s.Failed == s.Sent && s.InjectConfirmsHeld == 0
	}, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return got.Load() == n-1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, tx.Close())
	s := tx.Stats()
	t.Logf("%+v", s)
	require.Equal(t, uint64(1), s.Failed, "the last inject")
	assert.Less(t, s.InjectsUnconfirmed, uint64(33))
}
