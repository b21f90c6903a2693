package endpoint_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/sendbuf"
)

// Shape of the stalled-receiver tests.
const (
	// stallSize makes each message 64 bytes on the wire (tcp adds a
	// 16-byte header). The kernel stops taking bytes of a full socket at
	// page-sized boundaries, so with a power-of-two wire size the last
	// write that fits ends exactly there and the next send is refused
	// whole (EAGAIN), which is when tcp staged it: with the staging on,
	// every run lost the 140 messages (8960 bytes) it held. Sizes that
	// straddle the boundary end in a partial write, staged nothing, and
	// lost in some runs only.
	stallSize     = 48
	stallMessages = 1 << 20 // bound: the receiver's socket fills long before
	// stallQuiet: no completion for this long with every buffer in flight,
	// the receiver stalled, and then a pass of the sender's poller that
	// completes nothing: stalled (stalledPair.confirmStall). The quiet
	// alone was no stall under load (two busy loops and other tests, load
	// 15-30): with the receiver stalled and the sender's socket far from
	// full (0 to 2.3 MB unsent of its 4 MiB), no send completed for 0.2 to
	// 0.76 s, mostly with the socket at a zero window and probing, and
	// then sending went on; once (1 run in about 100) the 64 sends in
	// flight after 4,020 (of the 66,500 the sockets hold) had completed by
	// the time Close ran, and Close had nothing left to cancel
	// (closeThenRelease also checks right before Close).
	stallQuiet = 1 * time.Second
	// stallInjects bounds the messages of a sender with Inject, whose
	// buffers are free again at once: before SendConfig.MaxInjectsHeld, tcp
	// took 6k to 107k injects past what the sockets held (about 66,500
	// messages here, 4.2 MB on the wire) before it refused one, and a receiver draining that many under -race
	// and load could outlast a test's linger. At the bound the sender
	// counts as stalled; twice what the sockets held here, it leaves
	// tcp holding some 64k at the most.
	stallInjects = 1 << 17
	// stallInjectsSockets is stallInjects on sockets, whose sender with
	// Inject never stalls before it: sockets counts a send once its
	// progress thread took it, and the thread took all of 131,072
	// (6.3 MB) into the provider's 4 MiB socket buffers
	// (FI_SOCKETS_MAX_BUF_SZ) holding none, as it takes 65,536
	// (TestInjectBoundRefusesThenResumes: "the provider holds 0"), so
	// the count, not the receiver, ends the sending. Half as many take half the time, to
	// send and to drain after the release, which under load outlasted
	// awaitEnd's 30 s (awaitEnd has since waited for as long as messages
	// arrive).
	stallInjectsSockets = 1 << 16
)

// stalledPair is a listener whose first OnData stalls until release, and
// a sender that has sent 48-byte messages until it stalled too.
type stalledPair struct {
	ss       *stallSender
	ledger   *testpattern.Ledger
	stalled  atomic.Bool // the receiver is in its stalled OnData
	pattern  *testpattern.Pattern
	next     uint64 // the sequence number of the next message: all before it were sent OK
	s        *endpoint.SendEndpointBuffered
	receiver *endpoint.ReceiveEndpoint // the stalled connection
	ended    chan error                // the receiving connection's end
	release  func()                    // lets the receiver go on, once
}

// stallPair sets the pair up on a domain of prov with lcfg and scfg, whose
// Params, OnData, OnConnectionClosed and OnSendCompleted it sets. A send
// refused with NoResources (an inject the provider has no room for) is
// sent again on the next try with the same buffer; one refused at
// MaxInjectsHeld counts as stalled only once the provider held the bound
// for stallQuiet (stallSender).
func stallPair(t *testing.T, prov string, lcfg endpoint.ListenConfig, scfg endpoint.SendConfig) *stalledPair {
	t.Helper()
	return stallPairOn(t, openDomain(t, prov), lcfg, scfg)
}

// stallPairOn is stallPair on mgr, for a test that shares a poller with
// the sender (scfg.Runtime).
func stallPairOn(t *testing.T, mgr *domain.Manager, lcfg endpoint.ListenConfig, scfg endpoint.SendConfig) *stalledPair {
	t.Helper()
	pattern := testpattern.New(stallSize, testpattern.WithHeader())
	p := &stalledPair{ledger: testpattern.NewLedger(pattern, 0), pattern: pattern, ended: make(chan error, 1)}
	gate := make(chan struct{})
	stalled := make(chan *endpoint.ReceiveEndpoint, 1)
	var stallOnce, releaseOnce sync.Once
	lcfg.Params = netio.ReceiveParams{BufferSize: stallSize, BufferCount: 16}
	lcfg.OnData = func(ep *endpoint.ReceiveEndpoint, data []byte) {
		stallOnce.Do(func() { p.stalled.Store(true); stalled <- ep; <-gate })
		p.ledger.Received(data)
	}
	lcfg.OnConnectionClosed = func(_ *endpoint.ReceiveEndpoint, err error) {
		select {
		case p.ended <- err:
		default:
		}
	}
	l := listen(t, mgr, lcfg)
	// Released before the listener closes (cleanups run last first), also
	// when the test stops early.
	p.release = func() { releaseOnce.Do(func() { close(gate) }) }
	t.Cleanup(p.release)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	scfg.Params = netio.BufferedSendParams{BufferSize: stallSize, BufferCount: 64}
	scfg.OnSendCompleted = func(key uint64, st netio.Status) { p.ledger.Completed(key, st == netio.OK) }
	var err error
	p.s, err = endpoint.Dial(ctx, mgr, l.Addr(), scfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.s.Close()) })

	p.ss = &stallSender{t: t, p: p, inject: scfg.Inject, bound: uint64(scfg.MaxInjectsHeld), max: stallInjects}
	if mgr.Provider() == "sockets" {
		p.ss.max = stallInjectsSockets
	}
	if p.ss.bound == 0 {
		p.ss.bound = endpoint.DefaultMaxInjectsHeld
	}
	p.fill(t)
	p.receiver = <-stalled
	return p
}

// fill sends message p.next, p.next+1, ... until the sender is stalled
// (stallSender, confirmStall).
func (p *stalledPair) fill(t *testing.T) {
	t.Helper()
	ss, from := p.ss, p.next
	sentAll := p.ledger.SendUntilStalledConfirmed(stallMessages, stallQuiet,
		func(i uint64) bool { return ss.send(from + i) }, p.confirmStall)
	require.True(t, sentAll, "the sender never stalled: the receiver's socket did not fill")
	if ss.refused != nil {
		p.ledger.Refused(ss.refused.ID()) // never reported: not in the count, and its seq is p.next
		_, st := p.s.ReleaseBuffer(ss.refused.ID())
		require.Equal(t, netio.OK, st)
		ss.refused = nil
	}
}

// pending returns how many of the sender's sends are neither completed
// nor failed.
func (p *stalledPair) pending() uint64 {
	st := p.s.Stats()
	return st.Sent - st.Completed - st.Failed
}

// confirmStall tells a quiet spell of the sender from a stall: the
// receiver is in its stalled OnData, and a pass of the sender's poller,
// which drives the provider's progress, reports no send. Close, which
// reads the queue once more before it cancels what is pending, then finds
// the same sends pending.
func (p *stalledPair) confirmStall() bool {
	if !p.stalled.Load() {
		return false
	}
	before := p.s.Stats()
	endpoint.PollerPass(p.s)
	after := p.s.Stats()
	return after.Completed+after.Failed == before.Completed+before.Failed
}

// stallSender sends the stalled pair's messages for
// SendUntilStalledConfirmed, and sends a buffer refused with NoResources
// again on the next try. A refusal
// at MaxInjectsHeld does not count as stalled at once: the injects'
// reports came long before, so SendUntilStalled's quiet would pass while
// the provider may still be sending (sockets' counter lags its progress
// thread, and under load tcp's socket may take more). The refused buffer
// is sent again as soon as the provider holds less, and only a bound held
// for stallQuiet counts as stalled.
type stallSender struct {
	t       *testing.T
	p       *stalledPair
	inject  bool
	bound   uint64                 // the sender's MaxInjectsHeld, for Inject
	max     uint64                 // messages sent with Inject before it counts as stalled
	refused *sendbuf.NetworkBuffer // filled and recorded, refused with NoResources
}

// send sends message seq, or reports false when it cannot now.
func (ss *stallSender) send(seq uint64) bool {
	p := ss.p
	if ss.inject && seq >= ss.max {
		return false // as stalled: waits stallQuiet for the reports
	}
	buf := ss.refused
	if buf == nil {
		if buf = p.s.GetBuffer(); buf == nil {
			return false
		}
		p.pattern.Fill(buf.Bytes()[:stallSize], 0, seq)
		p.ledger.Sent(buf.ID(), seq)
	}
	st := p.s.SendBuffer(buf, stallSize)
	for st == netio.NoResources && ss.boundPassed() {
		st = p.s.SendBuffer(buf, stallSize)
	}
	if ss.refused = nil; st == netio.NoResources {
		ss.refused = buf
		return false
	}
	require.Equal(ss.t, netio.OK, st, "send %d", seq)
	p.next = seq + 1
	return true
}

// boundPassed reports, after a refusal, whether the provider held the
// bound and then, within stallQuiet, less.
func (ss *stallSender) boundPassed() bool {
	if !ss.inject || endpoint.SendsHeld(ss.p.s) < ss.bound {
		return false // the provider's own refusal, or no bound
	}
	for deadline := time.Now().Add(stallQuiet); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if endpoint.SendsHeld(ss.p.s) < ss.bound {
			return true
		}
	}
	return false
}

// closeThenRelease closes the sender with sends pending, releases the
// receiver, waits for the receiving connection to end, and checks that
// every send reported OK arrived, once and intact.
func (p *stalledPair) closeThenRelease(t *testing.T) {
	t.Helper()
	// A moment after the verdict the sends may have gone on all the same:
	// pauses of up to 0.76 s, the sender's poller reading its queue and
	// its socket at a zero window and probing, ended so under load, and a
	// loaded machine may not run this goroutine for that long. With
	// nothing pending, Close would have nothing to cancel: stall the
	// sender again, and close at once.
	for range 3 {
		if p.pending() > 0 {
			break
		}
		p.fill(t)
	}
	require.NoError(t, p.s.Close())
	atClose := p.ledger.Report()
	t.Logf("%s=%q; at Close: %d sends reported OK, %d not", fabric.TCPStagingEnv, fabric.TCPStaging(), atClose.OK, atClose.NotOK)
	require.NotZero(t, atClose.NotOK, "sends still pending at Close (canceled): the sender was stalled")
	assert.Equal(t, uint64(atClose.OK), p.s.Stats().Completed, "Stats.Completed counts the sends reported OK")

	p.release()
	p.awaitEnd(t)
	rep := p.ledger.Report()
	t.Logf("after the release: %v", rep)
	assert.NoError(t, rep.Err())
	assert.Equal(t, atClose.OK+atClose.NotOK, rep.OK+rep.NotOK, "every send reported once, by Close")
}

// TestCloseKeepsSendsReportedOK: a send reported OK reaches the receiver
// even when the sender closes while the receiver is behind. The receiver
// stalls in its first OnData, so that its socket and then the sender's
// fill; the sender sends until no completion comes with every buffer in
// flight, closes, and only then is the receiver released. libfabric 1.17's
// tcp completed sends it had copied into its own staging buffer
// (FI_TCP_STAGING_SBUF_SIZE, 9000 bytes by default) once the socket was
// full, and fi_close discarded them: 140 messages reported OK never
// arrived. The library turns the staging off (fabric.TCPStagingEnv).
func TestCloseKeepsSendsReportedOK(t *testing.T) {
	stallPair(t, "tcp", endpoint.ListenConfig{}, endpoint.SendConfig{}).closeThenRelease(t)
}

// TestCloseWhileRepliesArriveDeliveryComplete: a sender with replies that
// closes while the peer's replies still arrive closes a socket with unread
// data, and the kernel resets the connection, discarding the sends it
// still held. Without DeliveryComplete those were reported OK (64 KiB of
// replies sent as the stalled sender closed: about 64,000 of its 48-byte
// messages lost, in every run; docs/providers.md). With DeliveryComplete a
// send is OK only once placed at the peer, and nothing reported OK is lost.
func TestCloseWhileRepliesArriveDeliveryComplete(t *testing.T) {
	p := stallPair(t, "tcp",
		endpoint.ListenConfig{Replies: &endpoint.ListenReplies{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 64}}},
		endpoint.SendConfig{DeliveryComplete: true, Replies: &endpoint.DialReplies{
			Params:  netio.ReceiveParams{BufferSize: 4096, BufferCount: 2},
			OnReply: func(*endpoint.SendEndpointBuffered, []byte) {},
		}})
	sent := 0
	for range 16 {
		if buf := p.receiver.GetBuffer(); buf != nil && p.receiver.SendBuffer(buf, 4096) == netio.OK {
			sent++
		}
	}
	require.Equal(t, 16, sent, "replies sent as the sender closes")
	p.closeThenRelease(t)
}

// awaitEnd waits for the receiving connection to end, for as long as the
// receiver goes on taking messages (awaitProgress): draining the
// megabytes a stalled pair leaves in the sockets took over 30 s under
// -race and load.
func (p *stalledPair) awaitEnd(t *testing.T) {
	t.Helper()
	ended := false
	awaitProgress(t, "the end of the receiving connection after the release",
		func() int64 { return int64(p.ledger.Delivered()) },
		func() bool {
			select {
			case <-p.ended:
				ended = true
			default:
			}
			return ended
		})
}
