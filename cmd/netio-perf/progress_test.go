package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer that a progress goroutine writes while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openPty returns the two ends of a pseudo-terminal, closed at the end of
// the test.
func openPty(t *testing.T) (ptmx, tty *os.File) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	require.NoError(t, err)
	t.Cleanup(func() {
		tty.Close()
		ptmx.Close()
	})
	return ptmx, tty
}

var progressLine = regexp.MustCompile(`^(server|client): +\d+\.\d s  \d+ messages  \d+\.\d MB/s  \d+\.\d{4} Mmsg/s  (in flight|connections) \d+$`)

func TestProgressLineFormat(t *testing.T) {
	pr := &progress{role: "client", gauge: "in flight"}
	got := pr.line(progressCounts{messages: 3000, bytes: 3e6, gauge: 7}, progressCounts{messages: 1000, bytes: 1e6}, 2*time.Second, 3*time.Second)
	assert.Equal(t, "client:    3.0 s  3000 messages  1.0 MB/s  0.0010 Mmsg/s  in flight 7", got)
	assert.Regexp(t, progressLine, got)
	// A zero interval gives zero rates, never Inf or NaN.
	assert.Contains(t, pr.line(progressCounts{messages: 5}, progressCounts{}, 0, 0), "0.0 MB/s  0.0000 Mmsg/s")
}

// Lines come at every interval while the run goes on, and none after stop.
func TestProgressStartStop(t *testing.T) {
	var out lockedBuffer
	var n atomic.Uint64
	read := func() progressCounts {
		m := n.Add(100)
		return progressCounts{messages: m, bytes: m * 64, gauge: 3}
	}
	stop := progressFlags{mode: progressOn, interval: 5 * time.Millisecond}.start(&out, false, "server", "connections", read)
	require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 3 }, 10*time.Second, time.Millisecond)
	stop()
	stop() // twice is harmless
	final := out.String()
	for _, line := range strings.Split(strings.TrimSpace(final), "\n") {
		assert.Regexp(t, progressLine, line)
		assert.True(t, strings.HasSuffix(line, "connections 3"), line)
	}
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, final, out.String(), "no line after stop")

	stop = progressFlags{mode: progressOff, interval: time.Millisecond}.start(&out, false, "server", "connections", read)
	time.Sleep(10 * time.Millisecond)
	stop()
	assert.Equal(t, final, out.String(), "--progress off prints nothing")
}

// auto means a terminal and no --json; on and off mean what they say.
func TestProgressEnabled(t *testing.T) {
	_, tty := openPty(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer file.Close()
	auto := progressFlags{mode: progressAuto, interval: time.Second}
	assert.True(t, auto.enabled(tty, false), "a terminal")
	assert.False(t, auto.enabled(tty, true), "a terminal, --json")
	assert.False(t, auto.enabled(file, false), "a file")
	assert.False(t, auto.enabled(&bytes.Buffer{}, false), "a pipe or buffer")
	assert.True(t, progressFlags{mode: progressOn}.enabled(file, false))
	assert.False(t, progressFlags{mode: progressOff}.enabled(tty, false))
}

func TestProgressUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"server", "--progress", "sometimes"},
		{"server", "--progress", "on", "--json"},
		{"server", "--progress-interval", "0s"},
		{"client", "--connect", "127.0.0.1:1", "--progress", "on", "--json"},
		{"client", "--connect", "127.0.0.1:1", "--progress-interval", "-1s"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "--progress", "%q", args)
	}
}

// A server whose stdout is a terminal prints progress lines by itself; a
// client whose stdout is not prints none unless asked, and the last line
// stays the report.
func TestServerClientProgress(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ptmx, tty := openPty(t)
	var terminal lockedBuffer // what the server wrote to its terminal
	go func() {               // ends when the pty is closed
		sc := bufio.NewScanner(ptmx)
		for sc.Scan() {
			terminal.Write([]byte(strings.TrimRight(sc.Text(), "\r") + "\n"))
		}
	}()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"server", "--buf-size", "4K", "--count", "40000", "--progress-interval", "5ms"}, tty, &bytes.Buffer{})
	}()
	listening := regexp.MustCompile(`^LISTENING (\S+)\n`)
	require.Eventually(t, func() bool { return listening.MatchString(terminal.String()) }, 30*time.Second, time.Millisecond,
		"server did not print LISTENING")
	addr := listening.FindStringSubmatch(terminal.String())[1]

	var quiet, loud bytes.Buffer
	client := []string{"client", "--connect", addr, "--size", "4K", "--count", "20000", "--progress-interval", "5ms"}
	require.Equal(t, exitOK, run(ctx, client, &quiet, &bytes.Buffer{}))
	require.Equal(t, exitOK, run(ctx, append(client, "--progress", "on"), &loud, &bytes.Buffer{}))
	select {
	case c := <-code:
		require.Equal(t, exitOK, c)
	case <-ctx.Done():
		t.Fatal("server did not exit")
	}

	assert.Equal(t, 1, strings.Count(quiet.String(), "\n"), "not a terminal: the report only: %q", quiet.String())
	out := strings.Split(strings.TrimSpace(loud.String()), "\n")
	require.GreaterOrEqual(t, len(out), 2, "--progress on: %q", loud.String())
	for _, line := range out[:len(out)-1] {
		assert.Regexp(t, progressLine, line)
		assert.True(t, strings.HasPrefix(line, "client: "), line)
	}
	assert.True(t, strings.HasPrefix(out[len(out)-1], "client (tcp): 20000 messages"), "last line is the report: %q", out[len(out)-1])

	require.Eventually(t, func() bool { return strings.Contains(terminal.String(), "server (tcp)") }, 10*time.Second, time.Millisecond)
	server := strings.Split(strings.TrimSpace(terminal.String()), "\n")[1:]
	assert.True(t, strings.HasPrefix(server[len(server)-1], "server (tcp): 40000 messages"), "%q", server)
	progressLines := 0
	for _, line := range server[:len(server)-1] {
		if assert.Regexp(t, progressLine, line) {
			progressLines++
		}
	}
	assert.Positive(t, progressLines, "a terminal gets progress lines: %q", server)
}
