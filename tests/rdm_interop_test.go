package tests

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/rdm"
)

// TestRDMInteropCPeer: a plain C libfabric RDM program (tests/cpeer
// --endpoint rdm: fi_av_insert of the server's HOST:PORT, FI_SOURCE on the
// server, fi_recv from FI_ADDR_UNSPEC) feeds an rdm.Endpoint in this
// process, and an rdm.Endpoint feeds it, on the two RDM providers between
// hosts, with no framing beyond libfabric's own: every message is the
// pattern (byte i of message k is (k + i) % 251), checked on both sides.
func TestRDMInteropCPeer(t *testing.T) {
	cpeer := perfBuildCPeer(t)
	const size = 4096
	for _, prov := range []string{"tcp;ofi_rxm", "udp;ofi_rxd"} {
		count := interopCount(prov, 5000)
		t.Run(prov+"/cpeer-to-go", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			mgr := rdmDomain(t, prov)
			got := newPatternSink(size)
			rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: got.onData,
				Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 256}})
			require.NoError(t, err)
			defer func() { assert.NoError(t, rx.Close()) }()
			snd := perfStart(t, ctx, cpeer, "send", "--endpoint", "rdm", "--provider", prov, "--connect", rx.Addr(),
				"--size", strconv.Itoa(size), "--count", strconv.Itoa(count), "--verify", "--timeout", cpeerTimeout)
			require.Zero(t, snd.wait(t, ctx), "cpeer send: %s", snd.stderrText())
			require.Eventually(t, func() bool { return got.count() == count }, 30*time.Second, time.Millisecond,
				"every message from the C sender")
			assert.NoError(t, got.err())
			assert.Equal(t, uint64(count), snd.report(t).Messages)
		})
		t.Run(prov+"/go-to-cpeer", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rcv := perfStart(t, ctx, cpeer, "recv", "--endpoint", "rdm", "--provider", prov, "--listen", "127.0.0.1:0",
				"--size", strconv.Itoa(size), "--count", strconv.Itoa(count), "--verify", "--timeout", cpeerTimeout)
			addr := rcv.listening(t, ctx)
			mgr := rdmDomain(t, prov)
			var ok sync.WaitGroup
			ok.Add(count)
			tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
				Send:            netio.BufferedSendParams{BufferSize: size, BufferCount: 64},
				OnSendCompleted: func(uint64, netio.Status) { ok.Done() }})
			require.NoError(t, err)
			defer func() { assert.NoError(t, tx.Close()) }()
			peer, err := tx.AddPeer(addr)
			require.NoError(t, err)
			pat := testpattern.New(size)
			for k := range uint64(count) {
				buf := tx.GetBuffer()
				for ; buf == nil; buf = tx.GetBuffer() {
					time.Sleep(20 * time.Microsecond)
				}
				pat.Fill(buf.Bytes(), 0, k)
				for st := tx.SendBuffer(buf, size, peer); st != netio.OK; st = tx.SendBuffer(buf, size, peer) {
					require.Equal(t, netio.NoResources, st, "message %d", k)
					time.Sleep(20 * time.Microsecond)
				}
			}
			sent := make(chan struct{})
			go func() { ok.Wait(); close(sent) }()
			select { // bounded: a udp;ofi_rxd send to a peer that has gone never completes
			case <-sent:
			case <-ctx.Done():
				require.Failf(t, "sends did not all complete", "stats %+v; cpeer recv: %s", tx.Stats(), rcv.stderrText())
			}
			require.Zero(t, rcv.wait(t, ctx), "cpeer recv: %s", rcv.stderrText())
			r := rcv.report(t)
			assert.Equal(t, uint64(count), r.Messages)
			assert.Zero(t, r.VerifyErrors)
			assert.Zero(t, tx.Stats().Failed)
		})
	}
}

// rdmDomain opens a connectionless domain at 127.0.0.1, or without an
// address for a provider of named addresses (shm).
func rdmDomain(t *testing.T, provider string) *domain.Manager {
	t.Helper()
	addr := "127.0.0.1"
	if quirks.For(provider).NamedAddresses {
		addr = ""
	}
	mgr, err := domain.Open(domain.Config{Provider: provider, Address: addr, Endpoints: domain.EndpointRDM})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	return mgr
}

// patternSink checks the messages of senders that send the pattern from
// message 0, in whatever order they come (testpattern.Unordered).
type patternSink struct {
	mu   sync.Mutex
	u    testpattern.Unordered
	n    int
	errs []error
}

func newPatternSink(size int) *patternSink {
	return &patternSink{u: testpattern.Unordered{Pattern: testpattern.New(size), Len: size}}
}

func (s *patternSink) onData(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if err := s.u.Check(data); err != nil && len(s.errs) < 5 {
		s.errs = append(s.errs, err)
	}
}

func (s *patternSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// err returns the first bad message, or whether the counts are not those
// of streams from message 0; call it once every message arrived.
func (s *patternSink) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) > 0 {
		return fmt.Errorf("%d+ bad messages, first: %w", len(s.errs), s.errs[0])
	}
	return s.u.Finish()
}
