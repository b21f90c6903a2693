package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testbin"
)

// Integration tests of cmd/netio-perf: they build the binary and run real
// processes on loopback (and, for interop, the plain libfabric peer in
// tests/cpeer). Every process gets a --timeout of its own and is killed
// when its test's context ends, so nothing outlives a test.

// perfTestTimeout bounds each test.
const perfTestTimeout = 4 * time.Minute

// perfReport is the JSON line netio-perf and cpeer print last.
type perfReport struct {
	Role          string  `json:"role"`
	Provider      string  `json:"provider"`
	Messages      uint64  `json:"messages"`
	Bytes         uint64  `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	MBPerS        float64 `json:"mb_per_s"`
	MsgsPerS      float64 `json:"msgs_per_s"`
	VerifyErrors  uint64  `json:"verify_errors"`
	ReceiveErrors uint64  `json:"receive_errors"`
	FailedSends   uint64  `json:"failed_sends"`
}

// netioPerf and cPeer are built once per test binary; TestMain removes
// them.
var (
	netioPerf = testbin.Go("netio-perf", "..", "github.com/netio-go/netio/cmd/netio-perf")
	cPeer     = testbin.C("cpeer", filepath.Join("cpeer", "cpeer.c"), "-O2")
)

// TestMain removes the programs the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	netioPerf.Remove()
	cPeer.Remove()
	os.Exit(code)
}

// perfBuild returns cmd/netio-perf, built on first use.
func perfBuild(t *testing.T) string {
	t.Helper()
	return netioPerf.Path(t)
}

// perfBuildCPeer returns the C peer, built on first use, or skips the test
// when cc or pkg-config is missing.
func perfBuildCPeer(t *testing.T) string {
	t.Helper()
	return cPeer.Path(t)
}

// perfProc is a running process whose stdout is collected line by line.
type perfProc struct {
	name   string
	cmd    *exec.Cmd
	stderr perfBuffer
	first  chan string // the first stdout line, or closed without one
	done   chan error  // cmd.Wait's result, after stdout was read to the end

	mu    sync.Mutex
	lines []string
}

// perfStart starts bin with args; ctx's end kills it.
func perfStart(t *testing.T, ctx context.Context, bin string, args ...string) *perfProc {
	t.Helper()
	p := &perfProc{name: filepath.Base(bin) + " " + strings.Join(args, " "), first: make(chan string, 1), done: make(chan error, 1)}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Stderr = &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start(), p.name)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			n := len(p.lines)
			p.mu.Unlock()
			if n == 1 {
				p.first <- sc.Text()
			}
		}
		close(p.first)
		p.done <- p.cmd.Wait()
	}()
	return p
}

// listening waits for the "LISTENING ip:port" line and returns the address.
func (p *perfProc) listening(t *testing.T, ctx context.Context) string {
	t.Helper()
	addr := p.listeningAt(t, ctx)
	_, _, err := net.SplitHostPort(addr)
	require.NoError(t, err, "%s: LISTENING %q is not ip:port", p.name, addr)
	return addr
}

// listeningAt waits for the "LISTENING ADDR" line and returns ADDR: ip:port,
// or a name (an shm rdm endpoint's).
func (p *perfProc) listeningAt(t *testing.T, ctx context.Context) string {
	t.Helper()
	select {
	case line, ok := <-p.first:
		require.True(t, ok, "%s exited before listening; stderr: %s", p.name, p.stderrText())
		addr, found := strings.CutPrefix(line, "LISTENING ")
		require.True(t, found && addr != "", "%s: first line %q is not LISTENING ADDR", p.name, line)
		return addr
	case <-ctx.Done():
		require.FailNow(t, "no LISTENING line", "%s", p.name)
		return ""
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *perfProc) wait(t *testing.T, ctx context.Context) int {
	t.Helper()
	select {
	case err := <-p.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		require.NoError(t, err, p.name)
		return 0
	case <-ctx.Done():
		require.FailNow(t, "process did not exit in time", "%s; stderr: %s", p.name, p.stderrText())
		return -1
	}
}

// stdoutLines returns the stdout lines read so far.
func (p *perfProc) stdoutLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// stderrText returns what the process wrote to stderr so far.
func (p *perfProc) stderrText() string { return p.stderr.String() }

// perfBuffer is a bytes.Buffer that a process may write while a test reads.
type perfBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *perfBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *perfBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// report decodes the last stdout line as the JSON report; call it after
// wait.
func (p *perfProc) report(t *testing.T) perfReport {
	t.Helper()
	lines := p.stdoutLines()
	require.NotEmpty(t, lines, "%s printed nothing; stderr: %s", p.name, p.stderrText())
	var r perfReport
	last := lines[len(lines)-1]
	require.NoError(t, json.Unmarshal([]byte(last), &r), "%s: last line %q", p.name, last)
	return r
}

// perfExchange runs a receiver that prints LISTENING, then a sender against
// it; both must exit 0. It returns both reports and the elapsed time. A
// sender that fails ends the receiver at once (interrupt), which would
// otherwise wait for its --timeout.
func perfExchange(t *testing.T, ctx context.Context, recvBin string, recvArgs []string, sendBin string, sendArgs []string) (recv, send perfReport, took time.Duration) {
	t.Helper()
	start := time.Now()
	recvCtx, endRecv := context.WithCancel(ctx)
	defer endRecv()
	r := perfStart(t, recvCtx, recvBin, recvArgs...)
	addr := r.listeningAt(t, ctx)
	s := perfStart(t, ctx, sendBin, append(sendArgs, "--connect", addr)...)
	sendCode := s.wait(t, ctx)
	if sendCode != 0 {
		interrupt(r, endRecv)
	}
	recvCode := r.wait(t, ctx)
	took = time.Since(start)
	require.Equal(t, 0, sendCode, "sender %s failed; stderr: %s; receiver stdout: %q, stderr: %s",
		s.name, s.stderrText(), r.stdoutLines(), r.stderrText())
	require.Equal(t, 0, recvCode, "receiver %s failed; stderr: %s", r.name, r.stderrText())
	recv, send = r.report(t), s.report(t)
	t.Logf("receiver: %s", r.stdoutLines()[len(r.stdoutLines())-1])
	t.Logf("sender:   %s", s.stdoutLines()[len(s.stdoutLines())-1])
	t.Logf("took %v", took.Round(time.Millisecond))
	return recv, send, took
}

// interrupt ends p with SIGINT, on which netio-perf prints its report and
// cpeer its counts, so that a failed exchange says what the receiver got;
// kill (p's context's cancel) kills it if it has not exited within 2 s.
func interrupt(p *perfProc, kill context.CancelFunc) {
	if p.cmd.Process.Signal(os.Interrupt) == nil {
		select {
		case err := <-p.done:
			p.done <- err // for wait
			return
		case <-time.After(2 * time.Second):
		}
	}
	kill()
}

// TestPerfServerClient streams 100000 verified 4 KiB messages from a
// netio-perf client to a netio-perf server, two processes, on tcp.
//
// Not on sockets: libfabric 1.17's sockets provider stalls long streams,
// with sends outstanding and both sides' queues empty. The plain C peer
// stalls in every run between two processes (tests/cpeer, `cpeer recv
// --provider sockets --listen 127.0.0.1:P --size 4096 --count 100000`
// against `cpeer send`: 6 of 6 runs stopped after 24,000 to 35,000
// messages, also with 256 receives posted). netio-go stalls in 3 to 10% of
// runs between two processes (also with 10,000 messages, 8 sends in
// flight, or pollers that never spin) and in some in one process. A Go
// program on the fabric package alone, one goroutine posting and one
// polling, stalled the same way. The endpoint, storm, hostile and netns
// tests keep sockets covered.
func TestPerfServerClient(t *testing.T) {
	bin := perfBuild(t)
	const count = 100000
	for _, run := range []struct{ provider, path string }{
		{"tcp", "buffered"}, {"tcp", "zero-copy"},
	} {
		provider := run.provider
		t.Run(provider+"/"+run.path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			n := strconv.Itoa(count)
			server := []string{"server", "--provider", provider, "--listen", "127.0.0.1:0", "--count", n,
				"--buf-size", "4096", "--verify", "--json", "--timeout", "3m"}
			client := []string{"client", "--provider", provider, "--size", "4096", "--count", n,
				"--verify", "--json", "--timeout", "3m"}
			if run.path == "zero-copy" {
				client = append(client, "--zero-copy")
			}
			srv, cli, _ := perfExchange(t, ctx, bin, server, bin, client)

			assert.Equal(t, "server", srv.Role)
			assert.Equal(t, provider, srv.Provider)
			assert.Equal(t, uint64(count), srv.Messages)
			assert.Equal(t, uint64(count*4096), srv.Bytes)
			assert.Zero(t, srv.VerifyErrors)
			assert.Positive(t, srv.MBPerS)

			assert.Equal(t, "client", cli.Role)
			assert.Equal(t, uint64(count), cli.Messages)
			assert.Zero(t, cli.FailedSends)
			assert.Zero(t, cli.VerifyErrors)
			assert.Positive(t, cli.MBPerS)
		})
	}
}

// TestPerfInteropCPeer checks the wire against a plain libfabric program,
// tests/cpeer, in both directions on both message providers: cpeer send
// feeds netio-perf server, and netio-perf client feeds cpeer recv. Both
// sides send message k filled with (k+i)%251 (--verify), so the receiver
// checks the count, every length and every byte.
//
// cpeer asks fi_getinfo for FI_MSG only, as a plain C program does. On
// sockets the connecting side's capabilities travel in the connection
// request and a listener rejects any it did not ask for itself, so the
// client-to-cpeer-recv direction on sockets fails if netio-go's dial asks
// for more than messages (it asked for RMA as well until issue 17).
//
// The sockets runs are short: libfabric 1.17's sockets provider stalls long
// streams between two processes (see TestPerfServerClient). It stalls
// short ones now and then too, in plain C: cpeer send to cpeer recv with
// these 2,000 × 4 KiB stalls now and then under load (docs/providers.md),
// so a sockets run that ends at cpeer's 120 s watchdog is that stall.
func TestPerfInteropCPeer(t *testing.T) {
	cpeer := perfBuildCPeer(t)
	bin := perfBuild(t)
	const size = 4096
	for _, run := range []struct {
		provider string
		count    int
	}{
		{"tcp", 20000}, {"sockets", 2000},
	} {
		provider, count := run.provider, run.count
		n := strconv.Itoa(count)
		t.Run(provider+"/cpeer-send-to-server", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			srv, snd, _ := perfExchange(t, ctx,
				bin, []string{"server", "--provider", provider, "--listen", "127.0.0.1:0", "--count", n,
					"--buf-size", strconv.Itoa(size), "--verify", "--json", "--timeout", "2m"},
				cpeer, []string{"send", "--provider", provider, "--size", strconv.Itoa(size), "--count", n,
					"--verify", "--timeout", "120"})
			assert.Equal(t, "send", snd.Role)
			assert.Equal(t, provider, snd.Provider)
			assert.Equal(t, uint64(count), snd.Messages)

			assert.Equal(t, "server", srv.Role)
			assert.Equal(t, provider, srv.Provider)
			assert.Equal(t, uint64(count), srv.Messages)
			assert.Equal(t, uint64(count*size), srv.Bytes)
			assert.Zero(t, srv.VerifyErrors)
			assert.Zero(t, srv.ReceiveErrors)
		})
		t.Run(provider+"/client-to-cpeer-recv", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
			defer cancel()
			rcv, cli, _ := perfExchange(t, ctx,
				cpeer, []string{"recv", "--provider", provider, "--listen", "127.0.0.1:0", "--size", strconv.Itoa(size),
					"--count", n, "--verify", "--timeout", "120"},
				bin, []string{"client", "--provider", provider, "--size", strconv.Itoa(size), "--count", n,
					"--verify", "--json", "--timeout", "2m"})
			assert.Equal(t, "client", cli.Role)
			assert.Equal(t, provider, cli.Provider)
			assert.Equal(t, uint64(count), cli.Messages)
			assert.Zero(t, cli.FailedSends)

			assert.Equal(t, "recv", rcv.Role)
			assert.Equal(t, provider, rcv.Provider)
			assert.Equal(t, uint64(count), rcv.Messages)
			assert.Equal(t, uint64(count*size), rcv.Bytes)
			assert.Zero(t, rcv.VerifyErrors)
		})
	}
}

// TestPerfSweepQuick runs the loopback sweep with short budgets and checks
// that the table has one row per size, in order, with positive MB/s.
func TestPerfSweepQuick(t *testing.T) {
	bin := perfBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
	defer cancel()
	p := perfStart(t, ctx, bin, "--quick")
	require.Equal(t, 0, p.wait(t, ctx), "stderr: %s", p.stderrText())
	t.Logf("sweep:\n%s", strings.Join(p.stdoutLines(), "\n"))

	var rows [][]string
	for _, line := range p.stdoutLines() {
		if f := strings.Fields(line); len(f) == 8 && (f[1] == "B" || f[1] == "KiB" || f[1] == "MiB") {
			rows = append(rows, f)
		}
	}
	want := []string{"64 B", "1 KiB", "4 KiB", "64 KiB", "1 MiB"}
	require.Len(t, rows, len(want), "table rows in:\n%s", strings.Join(p.stdoutLines(), "\n"))
	for i, f := range rows {
		assert.Equal(t, want[i], f[0]+" "+f[1])
		mbps, err := strconv.ParseFloat(f[3], 64)
		if assert.NoError(t, err, "MB/s of %v", f) {
			assert.Positive(t, mbps, "MB/s of %v", f)
		}
		p50, err := strconv.ParseFloat(f[6], 64)
		if assert.NoError(t, err, "p50 of %v", f) {
			assert.Positive(t, p50, "latency p50 of %v", f)
		}
	}
	assert.Contains(t, p.stderrText(), "sweep: 1 MiB ping-pong")
}

// TestPerfExitStatus checks the documented exit statuses: 2 for a bad
// command line, 1 for a refused connection.
func TestPerfExitStatus(t *testing.T) {
	bin := perfBuild(t)
	ctx, cancel := context.WithTimeout(t.Context(), perfTestTimeout)
	defer cancel()

	bad := perfStart(t, ctx, bin, "client", "--connect", "not-an-address")
	assert.Equal(t, 2, bad.wait(t, ctx))
	assert.Contains(t, bad.stderrText(), "usage:")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	refused := perfStart(t, ctx, bin, "client", "--connect", addr, "--count", "1", "--timeout", "30s")
	assert.Equal(t, 1, refused.wait(t, ctx))
	assert.Contains(t, refused.stderrText(), "refused")
}
