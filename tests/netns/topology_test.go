package netns

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// script is hack/netns.sh, which builds and changes every topology: the
// tests and a person at a shell use the same commands.
var script = filepath.Join("..", "..", "hack", "netns.sh")

// netnsDir is where `ip netns add` names a namespace.
const netnsDir = "/var/run/netns"

// runScript runs hack/netns.sh with args and returns its stdout; the error
// carries its stderr.
func runScript(args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("netns.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

var netnsProblem = sync.OnceValue(func() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root (run the tests as root, as CI does)"
	}
	for _, tool := range []string{"bash", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("%s not found (ip is in iproute2): %v", tool, err)
		}
	}
	if _, err := os.Stat(script); err != nil {
		return fmt.Sprintf("%s missing: %v", script, err)
	}
	if _, err := runScript("check"); err != nil {
		return err.Error()
	}
	return ""
})

// skipWithoutNetns skips the test when this machine cannot create network
// namespaces, saying why.
func skipWithoutNetns(t *testing.T) {
	t.Helper()
	if problem := netnsProblem(); problem != "" {
		t.Skip("skipping: " + problem)
	}
}

// pruneStale removes topologies that killed test runs left behind (named
// after a process that is gone), when this machine can have any.
func pruneStale() {
	if netnsProblem() != "" {
		return
	}
	if _, err := runScript("prune"); err != nil {
		fmt.Fprintln(os.Stderr, "netns: pruning stale topologies:", err)
	}
}

// topology is a set of hosts behind one switch, see hack/netns.sh. Hosts
// are numbered from 1.
type topology struct {
	name  string
	ns    []string // namespace of host i+1
	addrs []string // address of host i+1
}

var topologies atomic.Uint64

// newTopology creates a topology of n hosts, removed when the test ends,
// whatever its outcome. It skips the test when namespaces are not usable.
func newTopology(t *testing.T, n int) *topology {
	t.Helper()
	skipWithoutNetns(t)
	tp := &topology{name: fmt.Sprintf("netio-%d-%d", os.Getpid(), topologies.Add(1))}
	// Registered first, so it runs last: after every child is gone. The
	// script also cleans up after itself when up fails half-way.
	t.Cleanup(func() {
		if _, err := runScript("down", tp.name); err != nil {
			t.Errorf("removing topology %s: %v", tp.name, err)
		}
	})
	out, err := runScript("up", tp.name, strconv.Itoa(n))
	require.NoError(t, err)
	for line := range strings.Lines(out) {
		// "hI NAMESPACE ADDRESS"
		f := strings.Fields(line)
		require.Len(t, f, 3, "netns.sh up printed %q", line)
		require.Equal(t, fmt.Sprintf("h%d", len(tp.ns)+1), f[0], "netns.sh up printed %q", out)
		tp.ns = append(tp.ns, f[1])
		tp.addrs = append(tp.addrs, f[2])
	}
	require.Len(t, tp.ns, n, "netns.sh up printed %q", out)
	return tp
}

// addr returns host i's address.
func (tp *topology) addr(i int) string { return tp.addrs[i-1] }

// setLink sets host i's switch port up or down: a pulled cable, as the
// host sees it.
func (tp *topology) setLink(t *testing.T, i int, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	_, err := runScript("link", tp.name, strconv.Itoa(i), state)
	require.NoError(t, err)
}

// setQdisc replaces the root qdisc of host i's interface, e.g. ("netem",
// "delay", "5ms"); ("none") removes it. It skips the test when the kernel
// or tc lacks that kind of qdisc.
func (tp *topology) setQdisc(t *testing.T, i int, args ...string) {
	t.Helper()
	_, err := runScript(append([]string{"qdisc", tp.name, strconv.Itoa(i)}, args...)...)
	if err != nil && isUnknownQdisc(err) {
		t.Skipf("skipping: qdisc %s is not available here (kernel without sch_%s?): %v", args[0], args[0], err)
	}
	require.NoError(t, err)
}

// isUnknownQdisc recognises tc's complaints about a qdisc kind that the
// kernel ("Specified qdisc kind is unknown") or tc ("Unknown qdisc")
// does not have.
func isUnknownQdisc(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "qdisc kind is unknown") || strings.Contains(msg, "Unknown qdisc")
}

// qdiscDrops returns how many packets host i's root qdisc dropped.
func (tp *topology) qdiscDrops(t *testing.T, i int) uint64 {
	t.Helper()
	out, err := runScript("drops", tp.name, strconv.Itoa(i))
	require.NoError(t, err)
	n, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	require.NoError(t, err, "netns.sh drops printed %q", out)
	return n
}

// leftovers lists the namespaces of topology name that still exist.
func leftovers(name string) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var left []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+"-") {
			left = append(left, e.Name())
		}
	}
	return left, nil
}

// rootLinks lists the interfaces of the machine's own namespace.
func rootLinks(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	require.NoError(t, err)
	var names []string
	for line := range strings.Lines(string(out)) {
		// "2: eth0: <BROADCAST,...> mtu 1500 ..."
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	return names
}

// TestTopology checks hack/netns.sh itself: up builds the namespaces and
// nothing else, a second up of the same name is refused, down removes
// everything and may run again, and prune removes only topologies whose
// process is gone.
func TestTopology(t *testing.T) {
	skipWithoutNetns(t)
	before := rootLinks(t)
	name := fmt.Sprintf("netio-%d-%d", os.Getpid(), topologies.Add(1))
	t.Cleanup(func() { _, _ = runScript("down", name) })

	out, err := runScript("up", name, "3")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("h1 %[1]s-h1 10.77.0.1\nh2 %[1]s-h2 10.77.0.2\nh3 %[1]s-h3 10.77.0.3\n", name), out)
	left, err := leftovers(name)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{name + "-sw", name + "-h1", name + "-h2", name + "-h3"}, left)
	assert.Equal(t, before, rootLinks(t), "no interface in the machine's own namespace")

	_, err = runScript("up", name, "2")
	assert.ErrorContains(t, err, "exists already")
	_, err = runScript("up", "bad/name")
	assert.ErrorContains(t, err, "bad topology name")
	_, err = runScript("exec", name, "4", "true")
	assert.ErrorContains(t, err, "no host 4")

	// prune keeps a topology whose process lives (this one).
	_, err = runScript("prune")
	require.NoError(t, err)
	left, err = leftovers(name)
	require.NoError(t, err)
	assert.Len(t, left, 4, "prune removed a live test's topology")

	for range 2 {
		_, err = runScript("down", name)
		require.NoError(t, err, "down, and down again")
		left, err = leftovers(name)
		require.NoError(t, err)
		assert.Empty(t, left)
	}

	// prune removes a topology whose process is gone.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	stale := fmt.Sprintf("netio-%d-1", gone.Process.Pid)
	t.Cleanup(func() { _, _ = runScript("down", stale) })
	_, err = runScript("up", stale, "2")
	require.NoError(t, err)
	_, err = runScript("prune")
	require.NoError(t, err)
	left, err = leftovers(stale)
	require.NoError(t, err)
	assert.Empty(t, left, "prune left a dead process's topology")
	assert.Equal(t, before, rootLinks(t))
}
