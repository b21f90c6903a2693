package rdm_test

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/rdm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// providers are the RDM providers tested in this process, with the local
// address each takes. udp;ofi_rxd was recorded crashing libfabric 1.17
// (SIGSEGV in fi_cq_readfrom) with many endpoints in one process
// (docs/providers.md, "Threads"), and a crash would take the whole package
// down; it is tested between processes (tests:
// TestRDMInteropCPeer), and here only when NETIO_RDM_ALL_PROVIDERS is
// set, for a developer looking at it. shm opens one endpoint per process
// (ErrOneEndpointPerProcess), so these tests of two and more cannot run
// on it here: TestTwoEndpointsOneDomainStream runs two in a child process
// with Config.ShareProcess, and tests/ runs it between processes.
var providers = func() []struct{ name, local string } {
	ps := []struct{ name, local string }{{"tcp;ofi_rxm", "127.0.0.1:0"}, {"sockets", "127.0.0.1:0"}}
	if os.Getenv("NETIO_RDM_ALL_PROVIDERS") != "" {
		ps = append(ps, struct{ name, local string }{"udp;ofi_rxd", "127.0.0.1:0"})
	}
	return ps
}()

func openDomain(t *testing.T, provider string) *domain.Manager {
	t.Helper()
	addr := "127.0.0.1"
	if provider == "shm" {
		addr = ""
	}
	mgr, err := domain.Open(domain.Config{Provider: provider, Address: addr, Endpoints: domain.EndpointRDM})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Zero(t, mgr.Stats().Registrations, "registrations alive after every endpoint closed")
		assert.NoError(t, mgr.Close())
	})
	return mgr
}

// inbox records what an endpoint received.
type inbox struct {
	mu   sync.Mutex
	msgs [][]byte
	from []rdm.Peer
}

func (in *inbox) onData(_ *rdm.Endpoint, from rdm.Peer, data []byte) {
	in.mu.Lock()
	in.msgs = append(in.msgs, bytes.Clone(data))
	in.from = append(in.from, from)
	in.mu.Unlock()
}

func (in *inbox) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

func TestSendAndReceive(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx, err := rdm.Open(mgr, p.local, rdm.Config{OnData: in.onData})
			require.NoError(t, err)
			defer func() { assert.NoError(t, rx.Close()) }()
			completed := make(chan netio.Status, 64)
			tx, err := rdm.Open(mgr, p.local, rdm.Config{
				OnData:          func(*rdm.Endpoint, rdm.Peer, []byte) {},
				OnSendCompleted: func(_ uint64, st netio.Status) { completed <- st },
			})
			require.NoError(t, err)
			defer func() { assert.NoError(t, tx.Close()) }()
			t.Logf("rx %q tx %q", rx.Addr(), tx.Addr())
			peer, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			const n = 20
			for i := range n {
				var buf = tx.GetBuffer()
				require.NotNil(t, buf)
				copy(buf.Bytes(), []byte{byte(i), 1, 2, 3})
				require.Eventually(t, func() bool {
					st := tx.SendBuffer(buf, 4, peer)
					require.NotEqual(t, netio.InvalidArgument, st)
					return st == netio.OK
				}, 5*time.Second, time.Millisecond)
				assert.Equal(t, netio.OK, <-completed)
			}
			require.Eventually(t, func() bool { return in.count() == n }, 5*time.Second, time.Millisecond)
			for i, m := range in.msgs {
				assert.Equal(t, []byte{byte(i), 1, 2, 3}, m)
			}
			t.Logf("from %+v (valid %v) %q", in.from[0], in.from[0].Valid(), rx.PeerAddr(in.from[0]))
		})
	}
}

// TestSendersAreNamed: a receive from a peer the receiver added names that
// peer; one from a sender it did not add comes with the zero Peer, never
// another peer's handle.
func TestSendersAreNamed(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			known := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
			stranger := open(t, mgr, p.local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
			knownPeer, err := rx.AddPeer(known.Addr())
			require.NoError(t, err)
			send(t, known, rx.Addr(), []byte("from known"))
			send(t, stranger, rx.Addr(), []byte("from stranger"))
			require.Eventually(t, func() bool { return in.count() == 2 }, 10*time.Second, time.Millisecond)
			for i, m := range in.msgs {
				switch string(m) {
				case "from known":
					if quirks.For(p.name).NoSources {
						assert.False(t, in.from[i].Valid(), "%s cannot name senders", p.name)
					} else {
						assert.Equal(t, knownPeer, in.from[i])
					}
				case "from stranger":
					assert.False(t, in.from[i].Valid(), "an unknown sender is not named, and never as another peer")
				}
			}
		})
	}
}

// open opens an endpoint closed at the end of the test.
func open(t *testing.T, mgr *domain.Manager, addr string, cfg rdm.Config) *rdm.Endpoint {
	t.Helper()
	e, err := rdm.Open(mgr, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, e.Close()) })
	return e
}

// send sends one message to addr, retrying while the provider is not ready
// (ofi_rxm connecting, shm mapping the peer).
func send(t *testing.T, from *rdm.Endpoint, addr string, data []byte) {
	t.Helper()
	peer, err := from.AddPeer(addr)
	require.NoError(t, err)
	buf := from.GetBuffer()
	require.NotNil(t, buf)
	copy(buf.Bytes(), data)
	require.Eventually(t, func() bool {
		st := from.SendBuffer(buf, len(data), peer)
		return st == netio.OK
	}, 10*time.Second, time.Millisecond, "send to %s", addr)
}
