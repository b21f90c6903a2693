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

// laneAttempt is one post of a parked lane's head to the provider, as the
// fault hook saw it, with the lane's retry schedule at that moment
// (rdm.LaneRetry).
type laneAttempt struct {
	at, since, due time.Time
	wait           time.Duration
	passed         bool // handed to the provider; refused (EAGAIN) otherwise
}

// laneLog records every post to one peer of an endpoint, refusing each
// (EAGAIN, as ofi_rxm does for a dead peer) unless pass lets it through.
type laneLog struct {
	mu       sync.Mutex
	attempts []laneAttempt
	pass     atomic.Int32 // posts still to let through
}

// wrap puts the log between e's sends to *peer and the provider.
func (g *laneLog) wrap(e *rdm.Endpoint, peer *atomic.Value) {
	rdm.WrapLanePost(e, func(post rdm.LanePost) rdm.LanePost {
		return func(ep *fabric.Endpoint, key uint32, n int, to rdm.Peer) fabric.Errno {
			if p, _ := peer.Load().(rdm.Peer); p != to {
				return post(ep, key, n, to)
			}
			a := laneAttempt{at: time.Now()}
			a.wait, a.since, a.due = rdm.LaneRetry(e, to)
			errno := fabric.EAGAIN
			if g.pass.Load() > 0 {
				g.pass.Add(-1)
				a.passed, errno = true, post(ep, key, n, to)
			}
			g.mu.Lock()
			g.attempts = append(g.attempts, a)
			g.mu.Unlock()
			return errno
		}
	})
}

// loggedDeadPeer adds a peer to e, 127.0.0.1:1, to which the provider
// refuses every send for now, each post logged, and returns the log and
// the peer.
func loggedDeadPeer(t *testing.T, e *rdm.Endpoint) (*laneLog, rdm.Peer) {
	t.Helper()
	g := new(laneLog)
	var watched atomic.Value
	g.wrap(e, &watched)
	peer, err := e.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	watched.Store(peer)
	return g, peer
}

func (g *laneLog) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.attempts)
}

func (g *laneLog) snapshot() []laneAttempt {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]laneAttempt(nil), g.attempts...)
}

// awaitAttempts waits until the log holds n attempts and returns them.
func (g *laneLog) awaitAttempts(t *testing.T, n int) []laneAttempt {
	t.Helper()
	require.Eventually(t, func() bool { return g.len() >= n }, 20*time.Second, time.Millisecond,
		"%d posts of the parked lane", n)
	return g.snapshot()
}

// timerRetries drops from as the retries a completion made before the
// lane was due (a completion retries the lane of its own peer, and lanes
// not backed off): one refused leaves the lane's schedule as it was, so
// the attempt after it was due at the same time, while a scheduled retry
// that was refused (the timer's, or a completion's once due) schedules the
// next one later. The last attempt, which nothing follows yet, is dropped:
// it may be either.
func timerRetries(as []laneAttempt) []laneAttempt {
	var kept []laneAttempt
	for i := 0; i+1 < len(as); i++ {
		if !as[i+1].due.Equal(as[i].due) {
			kept = append(kept, as[i])
		}
	}
	return kept
}

// checkBackoff asserts that the timer retried the lane in as (as[0] the
// post before them, as[1:] the scheduled retries of one head, which
// PeerTimeout does not bound) at ParkRetry while the head had been refused
// for less than ParkRetryMax when the retry before scheduled it, and past
// that with the wait doubled up to ParkRetryMax; and no retry came before
// it was due.
func checkBackoff(t *testing.T, as []laneAttempt) {
	t.Helper()
	for i := 1; i < len(as); i++ {
		a := as[i]
		require.Equal(t, as[1].since, a.since, "retry %d is of another head", i)
		assert.False(t, a.at.Before(a.due), "retry %d came before it was due", i)
		want := rdm.ParkRetry
		if scheduled := a.due.Add(-a.wait); i > 1 && scheduled.Sub(a.since) >= rdm.ParkRetryMax {
			want = min(2*as[i-1].wait, rdm.ParkRetryMax)
		} else if i > 1 {
			want = as[i-1].wait
		}
		assert.Equal(t, want, a.wait, "retry %d's wait, scheduled %v into the refusal", i, a.due.Add(-a.wait).Sub(a.since))
	}
}

// awaitWait waits until n of the lane's scheduled retries were made with
// the wait want, and returns the scheduled retries.
func (g *laneLog) awaitWait(t *testing.T, want time.Duration, n int) []laneAttempt {
	t.Helper()
	var as []laneAttempt
	require.Eventually(t, func() bool {
		as = timerRetries(g.snapshot())
		k := 0
		for _, a := range as {
			if a.wait == want {
				k++
			}
		}
		return k >= n
	}, 20*time.Second, time.Millisecond, "%d retries of the parked lane after a wait of %v", n, want)
	return as
}

// connectedSender opens a receiver and a sender (PeerTimeout an hour) on
// provider, adds the receiver to the sender as a peer and sends it one
// message, which connects (ofi_rxm), and returns the receiver's inbox, the
// sender, where the sender's reports go, and the peer.
func connectedSender(t *testing.T, provider, local string) (*inbox, *rdm.Endpoint, chan netio.Status, rdm.Peer) {
	t.Helper()
	mgr := openDomain(t, provider)
	in := new(inbox)
	rx := open(t, mgr, local, rdm.Config{OnData: in.onData})
	results := make(chan netio.Status, 64)
	tx := open(t, mgr, local, rdm.Config{OnData: nop, PeerTimeout: time.Hour,
		OnSendCompleted: func(_ uint64, st netio.Status) { results <- st }})
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	sendOne(t, tx, peer)
	require.Equal(t, netio.OK, awaitStatus(t, results))
	return in, tx, results, peer
}

// TestParkedRetryBacksOff: while the provider refuses a peer's parked
// sends and nothing completes, the timer retries the lane every ParkRetry
// until its head has been refused for ParkRetryMax, and then after a wait
// that doubles up to ParkRetryMax; as soon as the provider takes one of
// its sends the wait is ParkRetry again, and the next head is refused for
// ParkRetryMax before it backs off in turn.
func TestParkedRetryBacksOff(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			in, tx, results, peer := connectedSender(t, p.name, p.local)

			var g laneLog
			var watched atomic.Value
			watched.Store(peer)
			g.wrap(tx, &watched)
			sendOne(t, tx, peer) // refused: parked
			sendOne(t, tx, peer) // behind it in the lane
			as := g.awaitWait(t, rdm.ParkRetryMax, 2)
			checkBackoff(t, as)

			g.pass.Store(1) // the provider takes the head at the next retry
			require.Equal(t, netio.OK, awaitStatus(t, results))
			var k int
			as = g.snapshot()
			for k = range as {
				if as[k].passed {
					break
				}
			}
			require.True(t, as[k].passed)
			// The next head at once in the same pass, then the timer's
			// retries from ParkRetry again; the completion of the send
			// taken retries the lane too.
			as = timerRetries(g.awaitAttempts(t, k+8)[k+1:])
			require.GreaterOrEqual(t, len(as), 4)
			assert.Equal(t, rdm.ParkRetry, as[1].wait, "the wait after a send the provider took")
			checkBackoff(t, as)

			g.pass.Store(1 << 20)
			require.Equal(t, netio.OK, awaitStatus(t, results))
			require.Eventually(t, func() bool { return in.count() == 3 }, 10*time.Second, time.Millisecond)
		})
	}
}

// TestParkedLaneFailsAtPeerTimeout: the timer's retries back off, but none
// is due past the deadline (nor past half of it, where a waiting inject
// stops waiting, while that is ahead), so that a lane refused for ever
// fails at PeerTimeout, not up to one wait later.
func TestParkedLaneFailsAtPeerTimeout(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			const timeout = 600 * time.Millisecond
			results := make(chan netio.Status, 1)
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop, PeerTimeout: timeout,
				OnSendCompleted: func(_ uint64, st netio.Status) { results <- st }})
			// A wait so long that only the deadline ends it: 400 ms is
			// cut to half the deadline (300 ms), the next to 600 ms.
			rdm.SetParkRetry(tx, 400*time.Millisecond, 10*time.Second)
			g, peer := loggedDeadPeer(t, tx)
			start := time.Now()
			sendOne(t, tx, peer)
			st := awaitStatus(t, results)
			elapsed := time.Since(start)
			assert.Equal(t, netio.Failed, st)
			assert.GreaterOrEqual(t, elapsed, timeout, "the lane failed before PeerTimeout")
			assert.Less(t, elapsed, timeout+3*time.Second, "the lane failed long after PeerTimeout")

			as := g.snapshot()
			require.GreaterOrEqual(t, len(as), 3)
			last, since := as[len(as)-1], as[1].since // as[0]: the post that parked it
			assert.Equal(t, since.Add(timeout), last.due, "the last retry was due at the deadline")
			assert.GreaterOrEqual(t, last.at.Sub(since), timeout)
			half := since.Add(timeout / 2)
			for i := 2; i < len(as); i++ {
				assert.False(t, as[i].due.After(since.Add(timeout)), "retry %d was due past the deadline", i)
				if as[i-1].at.Before(half) {
					assert.False(t, as[i].due.After(half), "retry %d was due past half the deadline", i)
				}
			}
		})
	}
}

// TestBackedOffLaneNotRetriedByOthers: once a lane the provider refuses
// has backed off (refused for ParkRetryMax), the completions of a stream
// to another peer no longer retry it each (ofi_rxm would connect to a dead
// peer once per completion): each of its posts is a scheduled retry, made
// once it is due (by the timer or a completion) and scheduling the next.
func TestBackedOffLaneNotRetriedByOthers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			in, tx, results, live := connectedSender(t, p.name, p.local)
			g, dead := loggedDeadPeer(t, tx)
			sendOne(t, tx, dead)
			g.awaitWait(t, 2*rdm.ParkRetry, 1) // its wait doubled: backed off

			const stream = 1000
			before, start := g.len(), time.Now()
			for range stream {
				sendOne(t, tx, live)
				require.Equal(t, netio.OK, awaitStatus(t, results))
			}
			elapsed := time.Since(start)
			as := g.snapshot()[before:]
			for i, a := range as {
				assert.False(t, a.at.Before(a.due), "a post of the dead lane before it was due")
				if i > 0 {
					assert.False(t, a.due.Equal(as[i-1].due), "a post of the dead lane that scheduled nothing")
				}
			}
			during := len(as)
			// The timer's schedule: a wait of 2 ms doubling to the cap.
			most := 8 + int(2*elapsed/rdm.ParkRetryMax)
			assert.LessOrEqual(t, during, most, "the dead lane posted %d times during %d completions to the live peer in %v",
				during, stream, elapsed)
			require.Eventually(t, func() bool { return in.count() == stream+1 }, 10*time.Second, time.Millisecond)
		})
	}
}

// TestLaneNotBackedOffRetriedByOthers: a lane refused for less than
// ParkRetryMax (here an hour, so for the whole test) is retried by every
// completion of a stream to another peer, as a full queue or a connection
// being made wants: its refusal may end without a completion to its own
// peer.
func TestLaneNotBackedOffRetriedByOthers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			in, tx, results, live := connectedSender(t, p.name, p.local)
			rdm.SetParkRetry(tx, rdm.ParkRetry, time.Hour)
			g, dead := loggedDeadPeer(t, tx)
			sendOne(t, tx, dead)
			g.awaitAttempts(t, 3) // parked and retried by the timer

			const stream = 200
			before := g.len()
			for range stream {
				sendOne(t, tx, live)
				require.Equal(t, netio.OK, awaitStatus(t, results))
			}
			assert.GreaterOrEqual(t, g.len()-before, stream, "posts of the dead lane during %d completions to the live peer", stream)
			require.Eventually(t, func() bool { return in.count() == stream+1 }, 10*time.Second, time.Millisecond)
		})
	}
}

// TestRetryParkedAllocatesNothing: a completion's retry of lanes the
// provider refuses, which posts them and arms the timer for the earliest,
// allocates nothing.
func TestRetryParkedAllocatesNothing(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	tx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop, PeerTimeout: time.Hour})
	var posts atomic.Int64
	rdm.WrapLanePost(tx, func(rdm.LanePost) rdm.LanePost {
		return func(*fabric.Endpoint, uint32, int, rdm.Peer) fabric.Errno {
			posts.Add(1)
			return fabric.EAGAIN
		}
	})
	rdm.SetParkRetry(tx, rdm.ParkRetry, time.Hour) // never backed off: each retry posts
	peer, err := tx.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	sendOne(t, tx, peer)
	before := posts.Load()
	assert.Zero(t, rdm.RetryParkedAllocs(tx, 100))
	assert.GreaterOrEqual(t, posts.Load()-before, int64(100), "each retry posted the lane")
}

// TestParkedNoRetryAfterClose: Close stops the lanes' retry timer. The
// lane's wait is a minute, so that the timer is armed when Close runs and
// has not fired since.
func TestParkedNoRetryAfterClose(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop, PeerTimeout: time.Hour})
			rdm.SetParkRetry(tx, time.Minute, time.Minute)
			g, peer := loggedDeadPeer(t, tx)
			sendOne(t, tx, peer)
			g.awaitAttempts(t, 1)
			rdm.OnPoller(tx, func() {}) // the post has parked the send: the timer is armed for a minute
			require.NoError(t, tx.Close())
			assert.False(t, rdm.StopParkTimer(tx), "Close left the lanes' retry timer armed")
		})
	}
}

// awaitStatus returns the next status reported on results.
func awaitStatus(t *testing.T, results <-chan netio.Status) netio.Status {
	t.Helper()
	select {
	case st := <-results:
		return st
	case <-time.After(20 * time.Second):
		require.FailNow(t, "no completion")
		return 0
	}
}
