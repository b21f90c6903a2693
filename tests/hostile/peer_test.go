package hostile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testbin"
)

// peerTimeout is the hostile peer's own watchdog (--timeout); the process
// is also killed when its test's context ends.
const peerTimeout = 60 * time.Second

// hostilePeer is the hostile peer, built once per test binary from
// hostile.c; TestMain removes it.
var hostilePeer = testbin.C("hostile", filepath.Join("peer", "hostile.c"), "-O2", "-Wall", "-Wextra", "-Werror")

// buildPeer returns the hostile peer, built on first use, or skips the
// test when cc or pkg-config is missing.
func buildPeer(t *testing.T) string {
	t.Helper()
	return hostilePeer.Path(t)
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
