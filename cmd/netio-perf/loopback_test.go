package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the modes in this process, so that the race detector sees
// the tool's goroutines and callbacks. tests/perf_test.go runs the binary.

// serverRun is a server started with run in a goroutine.
type serverRun struct {
	addr  string
	lines chan string // stdout lines after LISTENING, closed at exit
	code  chan int
}

// startServer runs "server args..." and waits for its LISTENING line.
func startServer(t *testing.T, ctx context.Context, args ...string) *serverRun {
	t.Helper()
	return startListening(t, ctx, "server", args...)
}

// startListening runs "mode args..." and waits for its LISTENING line.
func startListening(t *testing.T, ctx context.Context, mode string, args ...string) *serverRun {
	t.Helper()
	pr, pw := io.Pipe()
	s := &serverRun{lines: make(chan string, 16), code: make(chan int, 1)}
	go func() {
		code := run(ctx, append([]string{mode}, args...), pw, io.Discard)
		pw.Close()
		s.code <- code
	}()
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				first <- sc.Text()
				continue
			}
			s.lines <- sc.Text()
		}
		close(first)
		close(s.lines)
	}()
	select {
	case line, ok := <-first:
		require.True(t, ok, "server exited before listening")
		addr, found := strings.CutPrefix(line, "LISTENING ")
		require.True(t, found, "first line %q", line)
		s.addr = addr
	case <-ctx.Done():
		t.Fatal("server did not print LISTENING")
	}
	return s
}

// wait returns the exit status and the last stdout line.
func (s *serverRun) wait(t *testing.T, ctx context.Context) (int, string) {
	t.Helper()
	var last string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				select {
				case code := <-s.code:
					return code, last
				case <-ctx.Done():
					t.Fatal("server did not exit")
				}
			}
			last = line
		case <-ctx.Done():
			t.Fatal("server did not exit")
		}
	}
}

func decodeReport(t *testing.T, line string) report {
	t.Helper()
	var r report
	require.NoError(t, json.Unmarshal([]byte(line), &r), "line %q", line)
	return r
}

func TestServerClientInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const count = 5000
	srv := startServer(t, ctx, "--count", "5000", "--buf-size", "4K", "--verify", "--json")

	var out, errOut bytes.Buffer
	code := run(ctx, []string{"client", "--connect", srv.addr, "--size", "4K", "--count", "5000", "--bufs", "32", "--verify", "--json"}, &out, &errOut)
	require.Equal(t, exitOK, code, "client: %s", errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c := decodeReport(t, lines[len(lines)-1])
	assert.Equal(t, "client", c.Role)
	assert.Equal(t, "tcp", c.Provider)
	assert.Equal(t, uint64(count), c.Messages)
	assert.Equal(t, uint64(count*4096), c.Bytes)
	assert.Zero(t, c.FailedSends)

	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, "server", s.Role)
	assert.Equal(t, uint64(count), s.Messages)
	assert.Equal(t, uint64(count*4096), s.Bytes)
	assert.Zero(t, s.VerifyErrors)
	assert.Equal(t, uint64(1), s.Connections)
	assert.Positive(t, s.MBPerS)
}

// TestServerCountsAcrossConnections sends from two clients at once to one
// server whose --count is their sum; each connection's pattern starts at 0.
func TestServerCountsAcrossConnections(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--count", "4000", "--buf-size", "1K", "--verify", "--json")
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			codes <- run(ctx, []string{"client", "--connect", srv.addr, "--size", "1K", "--count", "2000", "--verify", "--json"}, io.Discard, io.Discard)
		}()
	}
	for range 2 {
		assert.Equal(t, exitOK, <-codes)
	}
	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, uint64(4000), s.Messages)
	assert.Equal(t, uint64(2), s.Connections)
	assert.Zero(t, s.VerifyErrors)
}

// TestServerStopsOnSignal cancels the context (as SIGINT does): the server
// exits cleanly with its report.
func TestServerStopsOnSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sigCtx, signal := context.WithCancel(ctx)
	srv := startServer(t, sigCtx, "--json")
	signal()
	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	assert.Equal(t, uint64(0), decodeReport(t, last).Messages)
}

func TestServerTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--count", "10", "--timeout", "200ms")
	code, _ := srv.wait(t, ctx)
	assert.Equal(t, exitFail, code)
}

func TestClientConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	var errOut bytes.Buffer
	code := run(t.Context(), []string{"client", "--connect", addr, "--count", "1", "--timeout", "20s"}, io.Discard, &errOut)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, errOut.String(), "refused")
}

// runSweepJSON runs a sweep with --json added, requires success, and
// returns the report and the progress output.
func runSweepJSON(t *testing.T, args ...string) (sweepReport, string) {
	t.Helper()
	out, progress := runSweepTable(t, append(args, "--json")...)
	var r sweepReport
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &r))
	return r, progress
}

// runSweepTable runs a sweep, requires success, and returns its output and
// its progress output.
func runSweepTable(t *testing.T, args ...string) (out, progress string) {
	t.Helper()
	var o, p bytes.Buffer
	code := run(t.Context(), args, &o, &p)
	require.Equal(t, exitOK, code, "stderr: %s", p.String())
	return o.String(), p.String()
}

func TestSweepInProcess(t *testing.T) {
	r, progress := runSweepJSON(t, "--quick", "--sizes", "64,4K")
	require.Len(t, r.Rows, 2)
	for i, size := range []int{64, 4096} {
		row := r.Rows[i]
		assert.Equal(t, size, row.Size)
		assert.Positive(t, row.Messages)
		assert.Positive(t, row.MBPerS)
		assert.Positive(t, row.RoundTrips)
		assert.Positive(t, row.LatP50us)
		assert.GreaterOrEqual(t, row.LatP99us, row.LatP50us)
	}
	assert.Contains(t, progress, "sweep: 4 KiB throughput")
	assert.Contains(t, progress, "sweep: 4 KiB ping-pong")
}

// The RMA modes move data with Pull and Push of an exposed region and
// report throughput and per-operation latency for every size.
func TestSweepRMAModes(t *testing.T) {
	for _, mode := range []string{modeRMARead, modeRMAWrite} {
		t.Run(mode, func(t *testing.T) {
			r, progress := runSweepJSON(t, "--quick", "--mode", mode, "--sizes", "4K,64K")
			assert.Equal(t, mode, r.Mode)
			require.Len(t, r.Rows, 2)
			for i, size := range []int{4096, 65536} {
				row := r.Rows[i]
				assert.Equal(t, size, row.Size)
				assert.Positive(t, row.Messages)
				assert.Equal(t, row.Messages*uint64(size), row.Bytes)
				assert.Positive(t, row.MBPerS)
				assert.Positive(t, row.RoundTrips)
				assert.GreaterOrEqual(t, row.LatP99us, row.LatP50us)
			}
			assert.Contains(t, progress, "sweep: 64 KiB "+mode+" throughput")
		})
	}
	var out, progress bytes.Buffer
	assert.Equal(t, exitUsage, run(t.Context(), []string{"--mode", "bogus"}, &out, &progress))
}

// The sweep takes the window, receive depth and duration it is given, and
// reports the CPU the throughput part took; the table gets a CPU section.
func TestSweepWindowAndCPU(t *testing.T) {
	r, _ := runSweepJSON(t, "--sizes", "4K", "--window", "8", "--rx-bufs", "16", "--duration", "100ms")
	require.Len(t, r.Rows, 1)
	row := r.Rows[0]
	assert.Equal(t, 8, row.Window)
	assert.Equal(t, 16, row.RxBufs)
	assert.Equal(t, row.Messages*4096, row.Bytes)
	assert.Positive(t, row.CPUSeconds)
	assert.InDelta(t, row.CPUSeconds/(float64(row.Bytes)/1e9), row.CPUSecPerGB, 1e-9*row.CPUSecPerGB)
	assert.Positive(t, row.RoundTrips)

	table, _ := runSweepTable(t, "--sizes", "64", "--quick")
	assert.Contains(t, table, "CPU s/GB")
}

// --mode scale sends over every connection count into one listener and
// reports one row each, with the windows cut to share the receiver.
func TestSweepScaleMode(t *testing.T) {
	r, progress := runSweepJSON(t, "--mode", "scale", "--conns", "1,16", "--sizes", "4K", "--duration", "100ms")
	assert.Equal(t, modeScale, r.Mode)
	require.Len(t, r.Rows, 2)
	for i, conns := range []int{1, 16} {
		row := r.Rows[i]
		assert.Equal(t, conns, row.Connections)
		assert.Equal(t, 4096, row.Size)
		assert.Equal(t, scaleWindow(4096, conns), row.Window)
		assert.Positive(t, row.Messages)
		assert.Equal(t, row.Messages*4096, row.Bytes)
		assert.Positive(t, row.MBPerS)
		assert.Positive(t, row.CPUSecPerGB)
	}
	assert.Contains(t, progress, "scale: 16 connections, 4 KiB")

	table, _ := runSweepTable(t, "--mode", "scale", "--conns", "2", "--quick")
	assert.Regexp(t, `(?m)^\s+2\s+4 KiB\s+128\s+\d+`, table)
}
