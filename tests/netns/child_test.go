package netns

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// child is a role running in a host's namespace: this test binary,
// started again through `hack/netns.sh exec`, which execs `ip netns exec`,
// which execs the binary, so the process is the child itself and a signal
// sent to it reaches the role.
type child struct {
	name  string
	ctx   context.Context
	cmd   *exec.Cmd
	stdin io.WriteCloser

	stderr string // file the process writes its stderr to
	mu     sync.Mutex
	events []event
	exited bool
	state  *os.ProcessState
	change chan struct{} // closed and replaced when events grow or the process exits
}

// startRole starts role on host i of tp. The process dies when ctx ends or
// the test ends, and with the test binary.
func startRole(t *testing.T, ctx context.Context, tp *topology, i int, role string, cfg roleConfig) *child {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	conf, err := json.Marshal(cfg)
	require.NoError(t, err)

	c := &child{name: fmt.Sprintf("%s on h%d", role, i), ctx: ctx, change: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, "bash", script, "exec", tp.name, strconv.Itoa(i), exe)
	// A race-enabled binary sleeps a second before it exits (the race
	// runtime's atexit_sleep_ms); a role has nothing left to race then.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	c.cmd.Env = append(os.Environ(), roleEnv+"="+role, configEnv+"="+string(conf), "GORACE="+gorace)
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer stderr.Close() // the child has its own descriptor
	c.cmd.Stderr, c.stderr = stderr, stderr.Name()
	c.cmd.WaitDelay = 5 * time.Second
	// Whatever happens to the test binary, no role outlives it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start(), c.name)
	go c.read(stdout)
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill() // harmless when it has exited
		<-c.waitExited()
	})
	return c
}

// read collects the events until stdout closes, then reaps the process.
func (c *child) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Event == "" {
			ev = event{Event: evText, Error: sc.Text()}
		}
		c.update(func() { c.events = append(c.events, ev) })
	}
	_ = c.cmd.Wait()
	c.update(func() { c.exited, c.state = true, c.cmd.ProcessState })
}

// update changes the child's state and wakes every waiter.
func (c *child) update(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn()
	close(c.change)
	c.change = make(chan struct{})
}

// waitExited returns a channel closed once the process has been reaped.
func (c *child) waitExited() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c.mu.Lock()
			exited, change := c.exited, c.change
			c.mu.Unlock()
			if exited {
				return
			}
			<-change
		}
	}()
	return done
}

// waitEvent waits for the first event that match accepts, and fails the
// test when the process exits without one or time is up.
func (c *child) waitEvent(t *testing.T, what string, match func(event) bool) event {
	t.Helper()
	for {
		c.mu.Lock()
		events, exited, change := c.events, c.exited, c.change
		c.mu.Unlock()
		for _, ev := range events {
			if match(ev) {
				return ev
			}
		}
		if exited {
			require.FailNow(t, c.name+" exited before "+what, "%s", c.diagnostics())
		}
		select {
		case <-change:
		case <-c.ctx.Done():
			require.FailNow(t, c.name+": no "+what+" in time", "%s", c.diagnostics())
		}
	}
}

// listening waits for a receiver's address.
func (c *child) listening(t *testing.T) string {
	t.Helper()
	return c.waitEvent(t, "listening", func(ev event) bool { return ev.Event == evListening }).Addr
}

// progress waits for the progress event (of connection conn, for a
// receiver; 0 for a sender).
func (c *child) progress(t *testing.T, conn uint64) {
	t.Helper()
	c.waitEvent(t, "progress", func(ev event) bool { return ev.Event == evProgress && ev.Conn == conn })
}

// connected waits for the connection-established event of conn (a
// receiver's connection ID, or a resender's connection number).
func (c *child) connected(t *testing.T, conn uint64) event {
	t.Helper()
	return c.waitEvent(t, fmt.Sprintf("connection %d established", conn), func(ev event) bool {
		return ev.Event == evConnected && ev.Conn == conn
	})
}

// closed waits for the connection-closed event of conn (0 for a sender).
func (c *child) closed(t *testing.T, conn uint64) event {
	t.Helper()
	return c.waitEvent(t, fmt.Sprintf("connection %d closed", conn), func(ev event) bool {
		return ev.Event == evClosed && ev.Conn == conn
	})
}

// tell writes a control line to the role's stdin (see requested).
func (c *child) tell(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(c.stdin, line+"\n")
	require.NoError(t, err, c.name)
}

// finish tells a receiver or a resender to close and report.
func (c *child) finish(t *testing.T) {
	t.Helper()
	c.tell(t, "finish")
	require.NoError(t, c.stdin.Close(), c.name)
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL), c.name)
	st := c.waitExit(t)
	ws, ok := st.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "%s was not killed: %s", c.name, c.diagnostics())
}

// waitExit waits for the process to exit and returns how it ended.
func (c *child) waitExit(t *testing.T) *os.ProcessState {
	t.Helper()
	select {
	case <-c.waitExited():
	case <-c.ctx.Done():
		require.FailNow(t, c.name+" did not exit in time", "%s", c.diagnostics())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// report waits for the role's report and for it to exit with status 0.
func (c *child) report(t *testing.T) event {
	t.Helper()
	ev := c.waitEvent(t, "report", func(ev event) bool { return ev.Event == evReport })
	require.Zero(t, c.waitExit(t).ExitCode(), "%s failed: %s", c.name, c.diagnostics())
	return ev
}

// senderReport waits for a sender's report.
func (c *child) senderReport(t *testing.T) senderReport {
	t.Helper()
	ev := c.report(t)
	require.NotNil(t, ev.Sender, "%s: report without sender part", c.name)
	return *ev.Sender
}

// phaseReport waits for a redialling sender's report of its first
// connection.
func (c *child) phaseReport(t *testing.T) senderReport {
	t.Helper()
	ev := c.waitEvent(t, "phase report", func(ev event) bool { return ev.Event == evPhase })
	require.NotNil(t, ev.Sender, "%s: phase without sender report", c.name)
	return *ev.Sender
}

// resenderReport waits for a resender's report.
func (c *child) resenderReport(t *testing.T) resenderReport {
	t.Helper()
	ev := c.report(t)
	require.NotNil(t, ev.Resender, "%s: report without resender part", c.name)
	return *ev.Resender
}

// receiverReport waits for a receiver's report.
func (c *child) receiverReport(t *testing.T) receiverReport {
	t.Helper()
	ev := c.report(t)
	require.NotNil(t, ev.Receiver, "%s: report without receiver part", c.name)
	return *ev.Receiver
}

// diagnostics describes the process for a failure message.
func (c *child) diagnostics() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s", c.name)
	if c.exited {
		fmt.Fprintf(&b, " (%v)", c.state)
	}
	b.WriteString("\nevents:")
	for _, ev := range c.events {
		line, _ := json.Marshal(ev)
		fmt.Fprintf(&b, "\n  %s", line)
	}
	stderr, err := os.ReadFile(c.stderr)
	if err != nil {
		stderr = []byte(err.Error())
	}
	fmt.Fprintf(&b, "\nstderr:\n%s", stderr)
	return b.String()
}
