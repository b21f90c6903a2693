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
	tp.toggle(t, "link", i, up, "up", "down")
}

// toggle runs netns.sh command cmd for host i with the word for on or
// off.
func (tp *topology) toggle(t *testing.T, cmd string, i int, on bool, onWord, offWord string) {
	t.Helper()
	state := offWord
	if on {
		state = onWord
	}
	_, err := runScript(cmd, tp.name, strconv.Itoa(i), state)
	require.NoError(t, err)
}

// setQdisc replaces the root qdisc of host i's interface, e.g. ("netem",
// "delay", "5ms"); ("none") removes it. It skips the test when the kernel
// or tc lacks that kind of qdisc.
func (tp *topology) setQdisc(t *testing.T, i int, args ...string) {
	t.Helper()
	tp.qdisc(t, "qdisc", i, args)
}

// setPortQdisc is setQdisc on the switch's port to host i, where what the
// switch sends host i queues: a bottleneck in the switch, whose queue the
// sender's TCP does not keep short as it keeps its own host's.
func (tp *topology) setPortQdisc(t *testing.T, i int, args ...string) {
	t.Helper()
	tp.qdisc(t, "port-qdisc", i, args)
}

// qdisc runs netns.sh's qdisc or port-qdisc command cmd for host i.
func (tp *topology) qdisc(t *testing.T, cmd string, i int, args []string) {
	t.Helper()
	_, err := runScript(append([]string{cmd, tp.name, strconv.Itoa(i)}, args...)...)
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
	return tp.counts(t, "drops", i, 1)[0]
}

// portQdiscDrops returns how many packets the root qdisc of the switch's
// port to host i dropped.
func (tp *topology) portQdiscDrops(t *testing.T, i int) uint64 {
	t.Helper()
	return tp.counts(t, "port-drops", i, 1)[0]
}

// counts runs netns.sh command cmd for host i, which prints n numbers,
// and returns them.
func (tp *topology) counts(t *testing.T, cmd string, i, n int) []uint64 {
	t.Helper()
	out, err := runScript(cmd, tp.name, strconv.Itoa(i))
	require.NoError(t, err)
	f := strings.Fields(out)
	require.Len(t, f, n, "netns.sh %s printed %q", cmd, out)
	nums := make([]uint64, n)
	for k := range f {
		nums[k], err = strconv.ParseUint(f[k], 10, 64)
		require.NoError(t, err, "netns.sh %s printed %q", cmd, out)
	}
	return nums
}

// setGSO lets host i's kernel hand its interface packets of up to 64 KB
// (on, the default) or single frames only (off), for connections opened
// after the call. A lossy link needs off: a drop must lose one frame, as
// on a wire, not a 64 KB GSO packet of some 44.
func (tp *topology) setGSO(t *testing.T, i int, on bool) {
	t.Helper()
	tp.toggle(t, "gso", i, on, "on", "off")
}

// setLoss makes the switch drop pct percent ("1", "0.5", …) of the frames
// crossing host i's cable, either way, at random; "none" stops it. It
// skips the test when nft is missing, or when the kernel refuses the rule
// (no nf_tables for bridges, or no numgen).
func (tp *topology) setLoss(t *testing.T, i int, pct string) {
	t.Helper()
	skipWithoutNft(t)
	_, err := runScript("loss", tp.name, strconv.Itoa(i), pct)
	if err != nil && strings.Contains(err.Error(), "Could not process rule") {
		t.Skipf("skipping: the kernel refuses the loss rule (no nf_tables for bridges, or no numgen?): %v", err)
	}
	require.NoError(t, err)
}

// lost returns how many frames host i's loss rule dropped, and how many
// it saw.
func (tp *topology) lost(t *testing.T, i int) (dropped, seen uint64) {
	t.Helper()
	n := tp.counts(t, "lost", i, 2)
	return n[0], n[1]
}

// skipWithoutNft skips the test when nft, which the loss rule needs, is
// not installed.
func skipWithoutNft(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skipf("skipping: nft not found (package nftables; hack/setup-deps.sh installs it): %v", err)
	}
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
