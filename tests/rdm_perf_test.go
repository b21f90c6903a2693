package tests

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// rdmProviders are the connectionless providers netio-perf --endpoint rdm
// is tested on between processes. The server's LISTENING line is what the
// clients pass to --connect: IP:PORT, or shm's name for its endpoint.
var rdmProviders = []struct{ name, listen string }{
	{"tcp;ofi_rxm", "127.0.0.1:0"}, {"udp;ofi_rxd", "127.0.0.1:0"}, {"shm", ""},
}

// rdmTimeout and cpeerTimeout are the --timeout of the netio-perf and
// cpeer processes of the rdm tests: what a stall costs CI. A healthy run
// of the largest (10,000 verified 4 KiB messages) takes well under a
// second of wire time on an idle machine; on udp;ofi_rxd under CPU load it
// takes many times that (measured: docs/providers.md, hack/rxd-stall.sh).
const (
	rdmTimeout   = "60s"
	cpeerTimeout = "60"
)

// interopCount is how many verified messages an interop test carries on
// prov. On udp;ofi_rxd a stream's pace under CPU load is set by resends of
// the windows its receiver's socket dropped (docs/providers.md), so its
// time, and its exposure to a slow run's timeout, grow with the count,
// while what the test proves (the two programs' messages and pattern
// agree, each way) does not: 2,000 messages there (4,000 packets, about
// thirty of the sender's 128-packet windows); the full count on the
// others.
func interopCount(prov string, full int) int {
	if prov == "udp;ofi_rxd" {
		return min(full, 2000)
	}
	return full
}

// rdmServerArgs are netio-perf server --endpoint rdm's arguments. The
// server's poller sleeps whenever its queue is empty (--poll block): on
// tcp;ofi_rxm that is how libfabric 1.17 crashed every server in
// fi_trywait (quirks.Quirks.StaleWaitEntries) until pollers of ofi_rxm
// domains stopped using the queues' wait descriptors.
func rdmServerArgs(provider, listen string, count, size int) []string {
	args := []string{"server", "--endpoint", "rdm", "--provider", provider, "--count", strconv.Itoa(count),
		"--buf-size", strconv.Itoa(size), "--verify", "--json", "--timeout", rdmTimeout, "--poll", "block"}
	if listen != "" {
		args = append(args, "--listen", listen)
	}
	return args
}

// TestRDMPerfServerClients: netio-perf server --endpoint rdm receives from
// two netio-perf clients (three processes) at once, on each connectionless
// provider, and verifies every message of both streams without telling
// the senders apart (testpattern.Unordered): every byte of every message,
// and counts that two streams from message 0 give.
func TestRDMPerfServerClients(t *testing.T) {
	bin := perfBuild(t)
	const size, perClient = 4096, 5000
	for _, p := range rdmProviders {
		t.Run(p.name, func(t *testing.T) {
			if p.name == "udp;ofi_rxd" && os.Getenv("NETIO_RDM_ALL_PROVIDERS") == "" {
				// Two senders into one ofi_rxd receiver stall now and then
				// (a sender's completions stop until its timeout), in 3 of
				// 50 runs of the same shape in plain C (tests/cpeer) too:
				// docs/providers.md. One sender (the interop tests) stays.
				t.Skip("udp;ofi_rxd: two senders into one receiver stall in some runs, plain C programs too (docs/providers.md); set NETIO_RDM_ALL_PROVIDERS=1 to run it")
			}
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			srv := perfStart(t, ctx, bin, rdmServerArgs(p.name, p.listen, 2*perClient, size)...)
			addr := srv.listeningAt(t, ctx)
			var clients []*perfProc
			for range 2 {
				clients = append(clients, perfStart(t, ctx, bin, "client", "--endpoint", "rdm", "--provider", p.name,
					"--connect", addr, "--size", strconv.Itoa(size), "--count", strconv.Itoa(perClient),
					"--verify", "--json", "--timeout", rdmTimeout))
			}
			for _, c := range clients {
				require.Zero(t, c.wait(t, ctx), "%s: %s", c.name, c.stderrText())
				r := c.report(t)
				assert.Equal(t, uint64(perClient), r.Messages)
				assert.Zero(t, r.FailedSends)
			}
			require.Zero(t, srv.wait(t, ctx), "server: %s", srv.stderrText())
			r := srv.report(t)
			assert.Equal(t, p.name, r.Provider)
			assert.Equal(t, uint64(2*perClient), r.Messages)
			assert.Equal(t, uint64(2*perClient*size), r.Bytes)
			assert.Zero(t, r.VerifyErrors)
			assert.Zero(t, r.ReceiveErrors)
		})
	}
}

// TestRDMPerfInject: netio-perf client --endpoint rdm --inject sends 64 B
// messages with rdm.Endpoint.Inject (no buffers, no completions) to a
// server that verifies them; --size above the provider's inject size is
// refused.
func TestRDMPerfInject(t *testing.T) {
	bin := perfBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
	defer cancel()
	const count = 5000
	srv, cli, _ := perfExchange(t, ctx, bin, rdmServerArgs("tcp;ofi_rxm", "127.0.0.1:0", count, 64),
		bin, []string{"client", "--endpoint", "rdm", "--inject", "--size", "64", "--count", strconv.Itoa(count),
			"--verify", "--json", "--timeout", rdmTimeout})
	assert.Equal(t, uint64(count), cli.Messages)
	assert.Equal(t, uint64(count), srv.Messages)
	assert.Zero(t, srv.VerifyErrors)

	big := perfStart(t, ctx, bin, "client", "--endpoint", "rdm", "--inject", "--size", "1M", "--count", "1",
		"--connect", "127.0.0.1:9", "--timeout", "30s")
	assert.Equal(t, 1, big.wait(t, ctx))
	assert.Contains(t, big.stderrText(), "inject size")
}

// TestRDMPerfServerFindsBadData: a client that sends buffers without the
// pattern fails the rdm server's --verify (exit 1, errors counted).
func TestRDMPerfServerFindsBadData(t *testing.T) {
	bin := perfBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
	defer cancel()
	srv := perfStart(t, ctx, bin, rdmServerArgs("tcp;ofi_rxm", "127.0.0.1:0", 300, 1024)...)
	addr := srv.listeningAt(t, ctx)
	cli := perfStart(t, ctx, bin, "client", "--endpoint", "rdm", "--connect", addr, "--size", "1K", "--count", "300", "--json")
	require.Zero(t, cli.wait(t, ctx), cli.stderrText())
	assert.Equal(t, 1, srv.wait(t, ctx), "server: %s", srv.stderrText())
	assert.Positive(t, srv.report(t).VerifyErrors)
}

// TestRDMPerfInteropCPeer is item 5 of issue 18 through netio-perf: the
// plain C RDM peer (tests/cpeer --endpoint rdm: fi_av_insert of the
// server's HOST:PORT and fi_send; as a receiver FI_SOURCE and fi_recv from
// FI_ADDR_UNSPEC) feeds netio-perf server --endpoint rdm and is fed by
// netio-perf client --endpoint rdm, on both providers between hosts. The
// wire carries the pattern and nothing else; both receivers verify it.
func TestRDMPerfInteropCPeer(t *testing.T) {
	cpeer := perfBuildCPeer(t)
	bin := perfBuild(t)
	cpeerSendsAsNetio(t)
	const size = 4096
	sz := strconv.Itoa(size)
	for _, prov := range []string{"tcp;ofi_rxm", "udp;ofi_rxd"} {
		count := interopCount(prov, 10000)
		n := strconv.Itoa(count)
		t.Run(prov+"/cpeer-send-to-server", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			srv, snd, _ := perfExchange(t, ctx, bin, rdmServerArgs(prov, "127.0.0.1:0", count, size),
				cpeer, []string{"send", "--endpoint", "rdm", "--provider", prov, "--size", sz, "--count", n,
					"--verify", "--timeout", cpeerTimeout})
			assert.Equal(t, uint64(count), snd.Messages)
			assert.Equal(t, "server", srv.Role)
			assert.Equal(t, uint64(count), srv.Messages)
			assert.Equal(t, uint64(count*size), srv.Bytes)
			assert.Zero(t, srv.VerifyErrors)
			assert.Zero(t, srv.ReceiveErrors)
		})
		t.Run(prov+"/client-to-cpeer-recv", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			rcv, cli, _ := perfExchange(t, ctx,
				cpeer, []string{"recv", "--endpoint", "rdm", "--provider", prov, "--listen", "127.0.0.1:0",
					"--size", sz, "--count", n, "--verify", "--timeout", cpeerTimeout},
				bin, []string{"client", "--endpoint", "rdm", "--provider", prov, "--size", sz, "--count", n,
					"--verify", "--json", "--timeout", rdmTimeout})
			assert.Equal(t, uint64(count), cli.Messages)
			assert.Zero(t, cli.FailedSends)
			assert.Equal(t, "recv", rcv.Role)
			assert.Equal(t, uint64(count), rcv.Messages)
			assert.Equal(t, uint64(count*size), rcv.Bytes)
			assert.Zero(t, rcv.VerifyErrors)
		})
	}
}

// TestRDMPerfCPeerInject: the plain C RDM peer's injects (cpeer send
// --inject: fi_inject of 64 B, the last message an fi_send whose
// completion says the injects before it went out) feed netio-perf server
// --endpoint rdm, which verifies the pattern, on both providers between
// hosts: every message arrives, and each is the sender's. cpeer refuses a
// --size above the provider's inject size.
func TestRDMPerfCPeerInject(t *testing.T) {
	cpeer := perfBuildCPeer(t)
	bin := perfBuild(t)
	cpeerSendsAsNetio(t)
	const size, count = 64, 20000
	n, sz := strconv.Itoa(count), strconv.Itoa(size)
	for _, prov := range []string{"tcp;ofi_rxm", "udp;ofi_rxd"} {
		t.Run(prov, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			srv, snd, _ := perfExchange(t, ctx, bin, rdmServerArgs(prov, "127.0.0.1:0", count, size),
				cpeer, []string{"send", "--endpoint", "rdm", "--inject", "--provider", prov, "--size", sz,
					"--count", n, "--verify", "--timeout", cpeerTimeout})
			assert.Equal(t, uint64(count), snd.Messages)
			assert.Equal(t, uint64(count), srv.Messages)
			assert.Equal(t, uint64(count*size), srv.Bytes)
			assert.Zero(t, srv.VerifyErrors)
			assert.Zero(t, srv.ReceiveErrors)
		})
	}
	t.Run("above the inject size", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
		defer cancel()
		big := perfStart(t, ctx, cpeer, "send", "--endpoint", "rdm", "--inject", "--provider", "tcp;ofi_rxm",
			"--size", "1048576", "--count", "1", "--connect", "127.0.0.1:9", "--timeout", "30")
		assert.Equal(t, 1, big.wait(t, ctx))
		assert.Contains(t, big.stderrText(), "inject size")
	})
}

// cpeerSendsAsNetio turns tcp's send staging buffer off for the C peers the
// test starts, as netio-go turns it off for itself (fabric.TCPStagingEnv),
// whether or not this process has opened a domain yet. cpeer send closes
// once its last message completed, and on tcp that says the bytes reached
// the kernel only with the staging buffer off: with it on, a completed send
// may still sit in that buffer, and fi_close discards it.
func cpeerSendsAsNetio(t *testing.T) {
	t.Helper()
	t.Setenv(fabric.TCPStagingEnv, "0")
}

// TestRDMPerfShmWithoutCMA: shm copies messages above its inject size
// between processes with CMA (process_vm_readv/writev), which needs ptrace
// permission between them; it probes each peer with one
// process_vm_writev and, where that fails (Yama's ptrace_scope 1 for
// processes that are not descendants, 2 or 3), segments them through its
// shared region instead (SAR). FI_SHM_DISABLE_CMA=1 takes that path on a
// machine that allows CMA, so this is what a host without ptrace
// permission runs: 64 KiB messages, two processes, every byte checked.
func TestRDMPerfShmWithoutCMA(t *testing.T) {
	t.Setenv("FI_SHM_DISABLE_CMA", "1") // inherited by both processes
	bin := perfBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
	defer cancel()
	const size, count = 64 << 10, 2000
	srv, cli, _ := perfExchange(t, ctx, bin, rdmServerArgs("shm", "", count, size),
		bin, []string{"client", "--endpoint", "rdm", "--provider", "shm", "--size", strconv.Itoa(size),
			"--count", strconv.Itoa(count), "--verify", "--json", "--timeout", rdmTimeout})
	assert.Equal(t, uint64(count), cli.Messages)
	assert.Zero(t, cli.FailedSends)
	assert.Equal(t, uint64(count), srv.Messages)
	assert.Equal(t, uint64(count*size), srv.Bytes)
	assert.Zero(t, srv.VerifyErrors)
}
