package netns

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lossy link of TestImpairedLink/loss: what stands in for netem's
// "delay 5ms loss 1%" on a kernel without sch_netem.
//
// Loss: the switch drops lossPercent of the frames crossing the sender's
// cable at random, each direction (an nftables rule, see hack/netns.sh
// loss), one frame at a time (GSO off on both hosts).
//
// Delay: each switch port sends towards its host at lossRate through a
// queue of lossQueue bytes (tbf), which holds 10 KiB / 2 MB/s = 5.1 ms of
// data. The stream fills the queue in front of the receiver, and a packet
// there waits as long as the queue ahead of it takes to drain: up to
// 5.1 ms. Ping across it during the stream measured medians of 2.8 to
// 4.0 ms here, at most 4.7 ms, against 0.02 to 0.07 ms on the idle link;
// medians down to 0.03 ms when the stream stalled for a while (a loaded
// machine, or a retransmission timeout after tail drops).
//
// That is queueing delay in a switch buffer, not netem's fixed delay: an
// idle link has none, the wait varies with the queue, and a full queue
// drops what arrives: tail drops, counted apart from the random ones, and
// more of them (4 to 11% of the frames here). No qdisc of this kernel
// delays every packet by a fixed time (no netem, fq or etf), and a queue
// on the sender's own host would not do either: TCP keeps its own host's
// queue short (TCP small queues; ping measured 0.8 ms through one that
// holds 5 ms).
const (
	lossPercent = "1"
	lossRate    = "16mbit" // 2 MB/s
	lossQueue   = "10kb"   // 10 KiB
	// lossBuffer is how long lossQueue takes to drain at lossRate: the
	// most a packet waits in it.
	lossBuffer = 10 << 10 * time.Second / 2_000_000
	// lossCount messages of msgSize take some 4 s at lossRate: long
	// enough for the pings sent during the stream to meet a busy queue.
	lossCount = 2000
	// Pings sent across the idle link, and across the busy one once a
	// quarter of the stream arrived: lossPings × lossPingEvery is well
	// within the rest of it.
	lossPings     = 30
	lossPingEvery = 50 * time.Millisecond
)

// testLossyLink streams through the lossy link on each provider: TCP
// underneath must deliver the stream intact although the rule dropped
// frames, which it must have.
func testLossyLink(t *testing.T) {
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		skipWithoutNft(t)
		skipWithoutPing(t)
		for i := 1; i <= 2; i++ {
			tp.setGSO(t, i, false) // before any connection: TCP reads it at connect
			tp.setPortQdisc(t, i, "tbf", "rate", lossRate, "burst", "4kb", "limit", lossQueue)
		}
		// The sender's cable: every data frame and every acknowledgement
		// crosses it, so each direction loses lossPercent.
		tp.setLoss(t, 2, lossPercent)

		idle := tp.ping(t, 2, 1, lossPings, lossPingEvery)
		var busy pingResult
		run := streamRun{provider: provider, count: lossCount, midway: func(t *testing.T) {
			busy = tp.ping(t, 2, 1, lossPings, lossPingEvery)
		}}
		took := run.run(t, tp)
		dropped, seen := tp.lost(t, 2)
		tailDrops := tp.portQdiscDrops(t, 1) + tp.portQdiscDrops(t, 2)

		logRate(t, "loss/"+provider, run.count, took)
		t.Logf("loss rule: dropped %d of %d frames (%.2f%%); switch queues dropped %d more when full",
			dropped, seen, 100*float64(dropped)/float64(max(seen, 1)), tailDrops)
		t.Logf("round trip across the idle link: %v; during the stream: %v (the queue holds %v)", idle, busy, lossBuffer)

		assert.Positive(t, dropped, "the loss rule dropped no frame")
		// The data alone is a frame per 1500 bytes or more; 64 KB GSO
		// packets would be some 40 times fewer.
		assert.GreaterOrEqual(t, seen, uint64(lossCount*msgSize/1500), "frames the rule saw: single frames?")
		// 1% of several thousand frames: 7 standard deviations from
		// either bound.
		assert.InDelta(t, 0.01, float64(dropped)/float64(max(seen, 1)), 0.0075, "share of frames dropped")
		// The delay was there, and is the queue's: next to nothing on the
		// idle link, milliseconds behind the stream, and not far beyond
		// what the queue holds. Milliseconds for one ping at least: how
		// many meet a full queue depends on the stream, which a loaded
		// machine or a retransmission timeout may stall for a while.
		assert.Less(t, idle.median(), lossBuffer/2, "idle round trip")
		assert.GreaterOrEqual(t, slices.Max(append(busy.rtts, 0)), lossBuffer/2, "longest round trip during the stream")
		assert.Less(t, busy.median(), 5*lossBuffer, "round trip during the stream")
	})
}

// TestLossRule checks hack/netns.sh's loss rule: at 100% nothing crosses
// the cable and the rule counts every frame it dropped; a new percentage
// replaces the rule, never adds one; none removes it, and may run again;
// bad percentages are refused; and the rule lives in the switch's
// namespace, never in the machine's own ruleset.
func TestLossRule(t *testing.T) {
	skipWithoutNetns(t)
	skipWithoutNft(t)
	skipWithoutPing(t)
	before := ruleset(t, "")
	tp := newTopology(t, 2)
	sw := tp.name + "-sw"

	tp.setLoss(t, 2, "100")
	out, err := runScript("exec", tp.name, "2", "ping", "-n", "-c", "3", "-i", "0.05", "-w", "1", tp.addr(1))
	assert.Error(t, err, "ping across a cable that drops every frame: %s", out)
	dropped, seen := tp.lost(t, 2)
	assert.Positive(t, seen, "frames the rule saw")
	assert.Equal(t, seen, dropped, "frames dropped at 100%")

	tp.setLoss(t, 2, "0.5")
	rules := ruleset(t, sw)
	assert.Equal(t, 2, strings.Count(rules, "numgen"), "one rule per direction: %s", rules)
	assert.Equal(t, 2, strings.Count(rules, "numgen random mod 10000 <= 49 counter drop"), "0.5%%: %s", rules)

	for _, bad := range []string{"0", "0.001", "100.01", "-1", "1%", "x"} {
		_, err = runScript("loss", tp.name, "2", bad)
		assert.ErrorContains(t, err, "bad percentage", bad)
	}
	assert.Equal(t, rules, ruleset(t, sw), "a refused percentage changed the rule")

	for range 2 {
		tp.setLoss(t, 2, "none")
		assert.Empty(t, strings.TrimSpace(ruleset(t, sw)), "none, and none again")
	}
	_, err = runScript("lost", tp.name, "2")
	assert.ErrorContains(t, err, "no loss rule on host 2")
	res := tp.ping(t, 2, 1, 3, lossPingEvery)
	assert.Len(t, res.rtts, 3, "pings answered once the rule is gone")
	assert.Equal(t, before, ruleset(t, ""), "the machine's own ruleset")
}

// ruleset returns the nftables ruleset of namespace ns, or of the
// machine's own namespace when ns is empty, without counters: stray
// frames (IPv6 neighbour discovery) move them at any time.
func ruleset(t *testing.T, ns string) string {
	t.Helper()
	args := []string{"nft", "--stateless", "list", "ruleset"}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// skipWithoutPing skips the test when ping, which measures the round
// trip, is not installed.
func skipWithoutPing(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skipf("skipping: ping not found (package iputils-ping; hack/setup-deps.sh installs it): %v", err)
	}
}

// pingResult is what ping saw: how many echo requests it sent, and the
// round trip of each reply.
type pingResult struct {
	sent int
	rtts []time.Duration
}

// median returns the median round trip, 0 without replies.
func (p pingResult) median() time.Duration {
	if len(p.rtts) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(p.rtts))
	return s[len(s)/2]
}

func (p pingResult) String() string {
	if len(p.rtts) == 0 {
		return fmt.Sprintf("no reply to %d pings", p.sent)
	}
	return fmt.Sprintf("median %v, min %v, max %v (%d of %d pings answered)", p.median().Round(10*time.Microsecond),
		slices.Min(p.rtts).Round(10*time.Microsecond), slices.Max(p.rtts).Round(10*time.Microsecond), len(p.rtts), p.sent)
}

// ping sends count echo requests from host from to host to, every
// interval, and returns what came back. A lossy link may eat some; ping
// fails, and so does the test, only when none came back.
func (tp *topology) ping(t *testing.T, from, to, count int, interval time.Duration) pingResult {
	t.Helper()
	// -W: a reply later than a second counts as lost, which bounds the
	// wait for the last one.
	out, err := runScript("exec", tp.name, strconv.Itoa(from), "ping", "-n", "-c", strconv.Itoa(count),
		"-i", strconv.FormatFloat(interval.Seconds(), 'f', 3, 64), "-W", "1", tp.addr(to))
	require.NoError(t, err, "ping printed %q", out)
	res, err := parsePing(out)
	require.NoError(t, err, "ping printed %q", out)
	return res
}

// waitReachable waits until host from gets an echo reply from host to,
// pinging every 100 ms for up to 10 s; the test fails if none comes back.
func (tp *topology) waitReachable(t *testing.T, from, to int) {
	t.Helper()
	out, err := runScript("exec", tp.name, strconv.Itoa(from), "ping", "-n", "-c", "1", "-i", "0.1", "-w", "10", tp.addr(to))
	require.NoError(t, err, "host %d never reached host %d; ping printed %q", from, to, out)
}

var (
	// "64 bytes from 10.77.0.1: icmp_seq=1 ttl=64 time=0.989 ms"
	pingReply = regexp.MustCompile(`(?m)^\d+ bytes from .*icmp_seq=\d+ .*time=([0-9.]+) ms$`)
	// "40 packets transmitted, 37 received, 7.5% packet loss, time 2020ms"
	pingSummary = regexp.MustCompile(`(?m)^(\d+) packets transmitted, (\d+) received`)
)

// parsePing reads what iputils ping prints.
func parsePing(out string) (pingResult, error) {
	var res pingResult
	for _, m := range pingReply.FindAllStringSubmatch(out, -1) {
		ms, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return res, err
		}
		res.rtts = append(res.rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	sum := pingSummary.FindStringSubmatch(out)
	if sum == nil {
		return res, fmt.Errorf("no summary line")
	}
	res.sent, _ = strconv.Atoi(sum[1])
	if received, _ := strconv.Atoi(sum[2]); received != len(res.rtts) {
		// Duplicates and damaged replies are counted apart and would
		// show here: the link must neither make nor corrupt packets.
		return res, fmt.Errorf("%d replies listed, summary says %d received", len(res.rtts), received)
	}
	return res, nil
}

// TestParsePing checks the parser on what iputils ping prints; it needs
// no root.
func TestParsePing(t *testing.T) {
	out := strings.Join([]string{
		"PING 10.77.0.1 (10.77.0.1) 56(84) bytes of data.",
		"64 bytes from 10.77.0.1: icmp_seq=1 ttl=64 time=4.71 ms",
		"64 bytes from 10.77.0.1: icmp_seq=3 ttl=64 time=0.058 ms",
		"64 bytes from 10.77.0.1: icmp_seq=4 ttl=64 time=2.50 ms",
		"",
		"--- 10.77.0.1 ping statistics ---",
		"4 packets transmitted, 3 received, 25% packet loss, time 151ms",
		"rtt min/avg/max/mdev = 0.058/2.422/4.710/1.909 ms",
		"",
	}, "\n")
	res, err := parsePing(out)
	require.NoError(t, err)
	assert.Equal(t, 4, res.sent)
	assert.Equal(t, []time.Duration{4710 * time.Microsecond, 58 * time.Microsecond, 2500 * time.Microsecond}, res.rtts)
	assert.Equal(t, 2500*time.Microsecond, res.median())
	assert.Equal(t, "median 2.5ms, min 60µs, max 4.71ms (3 of 4 pings answered)", res.String())

	_, err = parsePing(strings.Replace(out, "3 received", "4 received", 1))
	assert.ErrorContains(t, err, "3 replies listed, summary says 4 received")
	_, err = parsePing("ping: connect: Network is unreachable\n")
	assert.ErrorContains(t, err, "no summary line")
	assert.Zero(t, pingResult{sent: 3}.median())
	assert.Equal(t, "no reply to 3 pings", pingResult{sent: 3}.String())
}
