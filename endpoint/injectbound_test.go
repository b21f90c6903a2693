package endpoint_test

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// boundHeld is SendConfig.MaxInjectsHeld in the tests of the bound: far
// below what tcp took without one (6k to 622k past the sockets' bytes).
const boundHeld = 256

// TestInjectBoundRefusesThenResumes: on tcp, with the receiver stalled,
// the provider holds exactly MaxInjectsHeld sends unsent (one sending
// goroutine; plus any regular send posted after, see below) and
// SendBuffer refuses the next inject with NoResources, changing nothing.
// On both providers, once the receiver goes on, injects are accepted
// again and every message arrives, none lost or counted unconfirmed.
// sockets counts a send once its progress thread has taken it, so what
// it holds at the stall depends on that thread's timing (see
// docs/providers.md): its subtest checks the resume and the delivery only.
func TestInjectBoundRefusesThenResumes(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := stallPair(t, prov, endpoint.ListenConfig{},
				endpoint.SendConfig{Inject: true, InjectLinger: time.Minute, MaxInjectsHeld: boundHeld})
			held := endpoint.SendsHeld(p.s)
			t.Logf("stalled after %d messages: the provider holds %d; %+v", p.next, held, p.s.Stats())
			if prov == "tcp" {
				// Exactly the bound, but for regular sends: a send the core
				// cannot queue a report for (a descheduled poller) goes with a
				// completion, is not refused, and stays pending.
				regular := uint64(len(p.s.PendingSends()))
				assert.GreaterOrEqual(t, held, uint64(boundHeld), "held up to the bound")
				assert.LessOrEqual(t, held, uint64(boundHeld)+regular, "one sender: no inject past the bound (%d regular pending)", regular)
				// Injected sends keep no buffer, but regular ones do: if they
				// hold every buffer (a poller descheduled for the whole
				// report queue), the refusal cannot be tried here; the
				// sendcore unit test checks it without a provider.
				if buf := p.s.GetBuffer(); buf != nil {
					p.pattern.Fill(buf.Bytes()[:stallSize], 0, p.next)
					assert.Equal(t, netio.NoResources, p.s.SendBuffer(buf, stallSize), "over the bound")
					assert.Equal(t, held, endpoint.SendsHeld(p.s), "the refusal posted nothing")
					_, st := p.s.ReleaseBuffer(buf.ID())
					assert.Equal(t, netio.OK, st, "the caller kept the buffer")
				} else {
					t.Logf("all buffers in %d regular sends: refusal not tried", regular)
				}
			}
			p.release()
			p.sendMore(t, 2*boundHeld)
			require.NoError(t, p.s.Close())
			p.awaitEnd(t)
			rep := p.ledger.Report()
			st := p.s.Stats()
			t.Logf("after Close: %v; %+v", rep, st)
			assert.NoError(t, rep.Err())
			assert.Equal(t, int(p.next), rep.OK, "every message reported OK")
			assert.Equal(t, int(p.next), rep.Delivered, "every message arrived")
			assert.Zero(t, st.InjectsUnconfirmed)
		})
	}
}

// sendMore sends n more messages of the stream once the receiver goes on,
// retrying those refused with NoResources until the provider has sent
// enough of what it holds; it fails if one stays refused for 30 s.
func (p *stalledPair) sendMore(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for range n {
		buf := p.s.GetBuffer()
		for ; buf == nil && time.Now().Before(deadline); buf = p.s.GetBuffer() {
			time.Sleep(time.Millisecond)
		}
		require.NotNil(t, buf, "no buffer free for 30 s")
		p.pattern.Fill(buf.Bytes()[:stallSize], 0, p.next)
		p.ledger.Sent(buf.ID(), p.next)
		st := p.s.SendBuffer(buf, stallSize)
		for ; st == netio.NoResources && time.Now().Before(deadline); st = p.s.SendBuffer(buf, stallSize) {
			time.Sleep(time.Millisecond)
		}
		require.Equal(t, netio.OK, st, "message %d refused for 30 s after the release", p.next)
		p.next++
	}
}

// TestNegativeMaxInjectsHeldRefused: a negative bound fails the dial with
// ErrInvalidArgument before anything is opened, with Inject or without
// (which ignores the bound), as a negative InjectLinger does.
func TestNegativeMaxInjectsHeldRefused(t *testing.T) {
	mgr := openDomain(t, "tcp")
	for _, cfg := range []endpoint.SendConfig{
		{Inject: true, MaxInjectsHeld: -1}, {MaxInjectsHeld: -1},
		{Inject: true, InjectLinger: -1}, {InjectLinger: -1},
	} {
		_, err := endpoint.Dial(t.Context(), mgr, "127.0.0.1:1", cfg)
		require.Error(t, err)
		assert.True(t, errors.Is(err, netio.ErrInvalidArgument), "%+v: %v", cfg, err)
	}
	assert.Empty(t, mgr.Registrations(), "nothing registered")
}

// TestInjectBoundCloseFlushNotRefused: a coalescing sender with Inject
// whose provider holds MaxInjectsHeld sends for a stalled receiver still
// posts its last buffer at Close (the close flush goes the regular way,
// which the bound does not refuse), so that once the receiver goes on every
// message taken arrives, none dropped. Before, the flush was an inject
// refused at the bound, and End dropped the buffer's messages although the
// linger would have sent them.
func TestInjectBoundCloseFlushNotRefused(t *testing.T) {
	gate := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate) }) }
	sink := &msgSink{onMessage: func(_ *endpoint.ReceiveEndpoint, n int64) {
		if n == 1 {
			<-gate
		}
	}}
	_, s := coalescingPair(t, "tcp", sink, endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: stallSize, BufferCount: 64},
		Inject: true, InjectLinger: time.Minute, MaxInjectsHeld: boundHeld})
	t.Cleanup(release) // before the sender's Close and the listener's
	require.LessOrEqual(t, stallSize, s.InjectSize(), "every coalesced buffer is injected")

	taken := sendUntilBound(t, s)
	require.NotZero(t, s.CoalesceStats().Pending, "the refused full buffer stays current")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Nothing but the CPU stands between Close and its flush (the receiver
	// holds the bound until the release), so a loaded machine's pause is
	// allowed the whole stallLimit.
	assert.Eventually(t, func() bool { return s.CoalesceStats().CloseFlushes == 1 }, stallLimit, time.Millisecond,
		"Close posts the last buffer while the provider holds the bound")
	release()
	require.NoError(t, recvErr(t, closed, time.Minute, "the end of Close"))
	cs := s.CoalesceStats()
	t.Logf("%d messages taken; %+v; %+v", taken, cs, s.Stats())
	assert.Zero(t, cs.Dropped, "nothing dropped")
	got := sink.await(t, taken)
	assert.Len(t, got, taken, "every message taken arrived, once")
	for i, m := range got {
		if !assert.Equal(t, uint64(i), m.Tag, "in order") {
			break
		}
	}
	assert.Zero(t, s.Stats().InjectsUnconfirmed)
}

// sendUntilBound has a coalescing sender send 8-byte messages until one is
// refused with the provider holding boundHeld sends, and returns how many
// it took. A refusal with less held (every buffer in a regular send while
// the poller is behind with its reports) waits and tries again.
func sendUntilBound(t *testing.T, s *endpoint.SendEndpointBuffered) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	msg := make([]byte, 8)
	for taken := 0; ; {
		require.Less(t, taken, 1<<21, "the sender never stalled: the receiver's socket did not fill")
		binary.LittleEndian.PutUint64(msg, uint64(taken))
		switch st := s.SendMessage(uint64(taken), msg); st {
		case netio.OK:
			taken++
		case netio.NoResources:
			if endpoint.SendsHeld(s) >= boundHeld {
				return taken
			}
			require.True(t, time.Now().Before(deadline), "refused for 30 s with less than the bound held")
			time.Sleep(time.Millisecond)
		default:
			require.Failf(t, "SendMessage", "message %d: %v", taken, st)
		}
	}
}
