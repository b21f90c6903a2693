package hostile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// peerTimeout is the hostile peer's own watchdog (--timeout); the process
// is also killed when its test's context ends.
const peerTimeout = 60 * time.Second

// peerBinary is the hostile peer, built once per test binary from
// hostile.c into a directory TestMain removes.
var peerBinary struct {
	once sync.Once
	dir  string
	path string
	skip string // why the peer cannot be built here
	err  error
}

// buildPeer builds hostile.c, or skips the test when cc or pkg-config is
// missing.
func buildPeer(t *testing.T) string {
	t.Helper()
	b := &peerBinary
	b.once.Do(func() {
		for _, tool := range []string{"cc", "pkg-config"} {
			if _, err := exec.LookPath(tool); err != nil {
				b.skip = fmt.Sprintf("the hostile peer needs %s to build hostile.c: %v", tool, err)
				return
			}
		}
		flags, err := exec.Command("pkg-config", "--cflags", "--libs", "libfabric").Output()
		if err != nil {
			b.err = fmt.Errorf("pkg-config libfabric: %w", err)
			return
		}
		if b.dir, err = os.MkdirTemp("", "netio-hostile-"); err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(b.dir, "hostile")
		args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-o", b.path, filepath.Join("peer", "hostile.c")}, strings.Fields(string(flags))...)
		if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("cc hostile.c: %w: %s", err, out)
		}
	})
	if b.skip != "" {
		t.Skip(b.skip)
	}
	require.NoError(t, b.err)
	return b.path
}

// removePeer deletes the built peer; TestMain calls it at the end.
func removePeer() {
	if peerBinary.dir != "" {
		_ = os.RemoveAll(peerBinary.dir)
	}
}

// peerReport is the JSON line the peer prints last.
type peerReport struct {
	Mode      string `json:"mode"`
	Requests  int    `json:"requests"`
	Connected int    `json:"connected"`
	Refused   int    `json:"refused"`
	Shutdown  int    `json:"shutdown"`
	Sent      int    `json:"sent"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
}

// runPeer runs the hostile peer in mode against addr and returns its
// report; it must exit 0.
func runPeer(t *testing.T, prov, mode, addr string, args ...string) peerReport {
	t.Helper()
	bin := buildPeer(t)
	ctx, cancel := context.WithTimeout(t.Context(), peerTimeout+10*time.Second)
	defer cancel()
	args = append([]string{mode, "--provider", prov, "--connect", addr,
		"--timeout", fmt.Sprint(int(peerTimeout.Seconds()))}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.FailNow(t, "hostile peer failed", "hostile %s: %v; stderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	require.NoError(t, err, "hostile %s", strings.Join(args, " "))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var rep peerReport
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &rep), "hostile %s: last line %q", mode, lines[len(lines)-1])
	t.Logf("hostile %s (%v): %s", mode, time.Since(start).Round(time.Millisecond), lines[len(lines)-1])
	return rep
}
