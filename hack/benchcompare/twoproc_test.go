package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFabtests(t *testing.T) {
	out := []byte("---\nfi_msg_bw -p tcp :\n- { xfer_size: 65536, iterations: 20000, total: 1310720000, time: 0.200000, MB/sec: 6553.600000, usec/xfer: 10.000000, Mxfers/sec: 0.100000 }\n")
	row, err := parseFabtests(out)
	require.NoError(t, err)
	assert.Equal(t, 65536, row.Size)
	assert.Equal(t, uint64(20000), row.Messages)
	assert.InDelta(t, 6553.6, row.MBPerS, 1e-9)
	assert.InDelta(t, 100000.0, row.MsgsPerS, 1e-6)
	assert.InDelta(t, 10.0, row.LatMeanus, 1e-9, "usec/xfer is the mean one-way latency of a ping-pong")
	for _, bad := range []string{"", "bytes iters\n64 1k", "- { xfer_size: 64, iterations: 0, time: 1, MB/sec: 1, usec/xfer: 1 }",
		"- { xfer_size: 64, iterations: 10, time: 1, usec/xfer: 1 }"} {
		_, err := parseFabtests([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestListensOn(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000
   1: 0100007F:1F91 0100007F:1F90 01 00000000:00000000 00:00000000 00000000
`)
	assert.True(t, listensOn(table, "0100007F:1F90"))
	assert.False(t, listensOn(table, "0100007F:1F91"), "established, not listening")
	assert.False(t, listensOn(table, "0100007F:0050"))
}

func TestWaitListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, waitListening(ctx, "/proc/net/tcp", ln.Addr().(*net.TCPAddr).Port))
	port, err := freePort()
	require.NoError(t, err)
	short, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	assert.Error(t, waitListening(short, "/proc/net/tcp", port), "nobody listens on a free port")
}

func TestCounts2p(t *testing.T) {
	assert.Equal(t, 250000, bwCount2p(64, time.Second))
	assert.Equal(t, 76293, bwCount2p(64<<10, time.Second))
	assert.Equal(t, 8*window2p, bwCount2p(1<<20, 10*time.Millisecond), "at least eight windows")
	assert.Equal(t, 20000, ppCount2p(64, 10*time.Second))
	assert.Equal(t, 500, ppCount2p(1<<20, 10*time.Millisecond))
	assert.Equal(t, 946, ppCount2p(1<<20, 4*time.Second))
}

// Loopback TCP's modes are read off the reference's rounds: two groups
// 1.3x apart or more split every contender's rounds at the same figure.
func TestSplitModes(t *testing.T) {
	const size = 1 << 20
	samples := []sample{
		bw(1, implFabtests, size, 5600), bw(2, implFabtests, size, 6000), bw(3, implFabtests, size, 11800),
		bw(1, impl2pNetio, size, 6500), bw(2, impl2pNetio, size, 11000), bw(3, impl2pNetio, size, 12000),
	}
	m := splitModes(samples, size, implFabtests)
	require.NotNil(t, m)
	assert.InDelta(t, 8414.3, m.Split, 0.1, "between 6000 and 11800")
	assert.Equal(t, modeFigure{Rounds: 2, MBPerS: 5800}, m.Slow[implFabtests])
	assert.Equal(t, modeFigure{Rounds: 1, MBPerS: 11800}, m.Fast[implFabtests])
	assert.Equal(t, modeFigure{Rounds: 2, MBPerS: 11500}, m.Fast[impl2pNetio])
	assert.Equal(t, modeFigure{Rounds: 1, MBPerS: 6500}, m.Slow[impl2pNetio])
	assert.Nil(t, splitModes([]sample{bw(1, implFabtests, size, 6000), bw(2, implFabtests, size, 7000)}, size, implFabtests),
		"1.17x apart is one mode")
}

func TestSummarizeTwoProc(t *testing.T) {
	samples := []sample{
		bw(1, impl2pNetio, 4096, 700), bw(2, impl2pNetio, 4096, 900),
		bw(1, implFabtests, 4096, 1000), bw(2, implFabtests, 4096, 800),
		{Round: 1, Impl: impl2pNetio, Mode: modePingPong, Size: 4096, RoundTrips: 10, LatP50us: 5, LatMeanus: 6},
		{Round: 1, Impl: impl2pNetioBusy, Mode: modePingPong, Size: 4096, RoundTrips: 10, LatP50us: 4, LatMeanus: 4.4},
		{Round: 1, Impl: implFabtests, Mode: modePingPong, Size: 4096, RoundTrips: 10, LatMeanus: 4},
		{Round: 2, Impl: impl2pC, Mode: modeBandwidth, Size: 4096, Error: "failed"},
	}
	rows := summarizeTwoProc(samples, []int{4096}, 2, implFabtests)
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, figures{Rounds: 2, MBPerS: 800, MBPerSMin: 700, MBPerSMax: 900, MsgsPerS: 800e6 / 4096, CPUSecPerGB: 1,
		LatRounds: 1, LatMeanus: 6, LatP50us: 5}, r.Impl[impl2pNetio])
	assert.Equal(t, 0, r.Impl[impl2pC].Rounds, "a failed round is no figure")
	assert.InDelta(t, 800.0/900, r.BWRatio[implFabtests], 1e-9)
	assert.NotContains(t, r.BWRatio, impl2pC)
	assert.Equal(t, []float64{0.7, 900.0 / 800}, r.ByRound)
	assert.InDelta(t, 1.5, r.LatRatio[implFabtests], 1e-9)
	assert.InDelta(t, 1.1, r.LatRatio[impl2pNetioBusy+"/"+implFabtests], 1e-9)
	assert.Nil(t, r.Modes)

	var out bytes.Buffer
	require.NoError(t, printTwoProc(&out, &twoProcReport{Rounds: 2, Window: 64, Reference: implFabtests, BusyPoll: "busy-locked", Rows: rows}, "tcp"))
	lines := strings.Split(out.String(), "\n")
	assert.Equal(t, []string{"4", "KiB", "800", "(700-900)", "900", "(800-1000)", "-", "-", "0.89", "-", "-", "0.70", "1.12"},
		fieldsOf(lines, "bandwidth, MB/s: median", "4 KiB"))
	assert.Equal(t, []string{"4", "KiB", "6.00", "(5.00)", "4.40", "(4.00)", "4.00", "-", "-", "1.50", "-", "-", "1.10"},
		fieldsOf(lines, "ping-pong one-way latency", "4 KiB"))
	assert.Contains(t, out.String(), "fabtests not found")
	assert.Contains(t, out.String(), "netio busy = --poll busy-locked", "the latency table names the busy ping-pong's poller")
}

func TestFindFabtests(t *testing.T) {
	dir := t.TempDir()
	assert.Equal(t, fabtests{}, findFabtests(dir))
	for _, name := range []string{"fi_msg_bw", "fi_msg_pingpong"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	assert.Equal(t, fabtests{bw: filepath.Join(dir, "fi_msg_bw"), pingpong: filepath.Join(dir, "fi_msg_pingpong")}, findFabtests(dir))
	require.NoError(t, os.Remove(filepath.Join(dir, "fi_msg_pingpong")))
	assert.Equal(t, fabtests{}, findFabtests(dir), "both or none")
}

// fakeScript writes an executable shell script.
func fakeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "peer")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

func TestRunPair(t *testing.T) {
	srv := fakeScript(t, "echo 'LISTENING 127.0.0.1:4242'\necho '{\"messages\":7}'\n")
	cli := fakeScript(t, "echo \"{\\\"connect\\\":\\\"$1\\\"}\"\n")
	tl := tools{timeout: 10 * time.Second}
	out, err := tl.runPair(t.Context(), pairSpec{server: command{srv, nil},
		client: func(a string) command { return command{cli, []string{a}} }})
	require.NoError(t, err)
	assert.Equal(t, "{\"connect\":\"127.0.0.1:4242\"}\n", string(out.client))
	assert.Contains(t, string(out.server), "{\"messages\":7}")

	dead := fakeScript(t, "echo 'cannot listen' >&2\nexit 1\n")
	_, err = tl.runPair(t.Context(), pairSpec{server: command{dead, nil},
		client: func(a string) command { return command{cli, []string{a}} }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot listen")

	failing := fakeScript(t, "echo 'refused' >&2\nexit 1\n")
	waits := fakeScript(t, "echo 'LISTENING 127.0.0.1:4242'\nsleep 30\n")
	start := time.Now()
	_, err = tl.runPair(t.Context(), pairSpec{server: command{waits, nil},
		client: func(string) command { return command{failing, nil} }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused")
	assert.Less(t, time.Since(start), 8*time.Second, "a failed client ends its server")
}

// TestTCPPeers runs the Go TCP server and client sides against each other
// in this process: every message counted, every round trip timed.
func TestTCPPeers(t *testing.T) {
	for _, mode := range []string{modeBandwidth, modePingPong} {
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		var srvOut bytes.Buffer
		go func() {
			done <- runTCPPeer(t.Context(), roleTCPServer, []string{"--mode", mode, "--size", "1K", "--timeout", "20s"},
				io.MultiWriter(pw, &srvOut), io.Discard)
			pw.Close()
		}()
		sc := bufio.NewScanner(pr)
		require.True(t, sc.Scan())
		addr, ok := strings.CutPrefix(sc.Text(), listeningPrefix)
		require.True(t, ok, sc.Text())
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		var cliOut bytes.Buffer
		code := runTCPPeer(t.Context(), roleTCPClient, []string{"--mode", mode, "--size", "1K", "--count", "500",
			"--connect", addr, "--timeout", "20s"}, &cliOut, io.Discard)
		require.Equal(t, 0, code)
		require.Equal(t, 0, <-done)
		var srvRow, cliRow perfRow
		require.NoError(t, unmarshalLastLine(srvOut.Bytes(), &srvRow))
		require.NoError(t, unmarshalLastLine(cliOut.Bytes(), &cliRow))
		if mode == modeBandwidth {
			assert.Equal(t, uint64(500), srvRow.Messages)
			assert.Equal(t, uint64(500), cliRow.Messages)
			assert.Positive(t, srvRow.MBPerS)
		} else {
			assert.Equal(t, 500, cliRow.RoundTrips)
			assert.Positive(t, cliRow.LatMeanus)
			assert.GreaterOrEqual(t, cliRow.LatP99us, cliRow.LatP50us)
		}
	}
	var errOut bytes.Buffer
	assert.Equal(t, 2, runTCPPeer(t.Context(), roleTCPClient, []string{"--size", "1K", "--count", "5"}, io.Discard, &errOut))
	assert.Contains(t, errOut.String(), "--connect")
}

// Shape of the tests that run C baseline pairs. The C programs spin on
// their queues, so on a loaded machine a round trip waits for the
// scheduler to run both: beside two busy loops and other tests (load
// 33) a 64-byte ping-pong's mean one-way latency was 2.2 ms and its p99
// 49 ms, and the whole test (the C build, the bandwidth pairs and 1,550
// round trips) took 28 s, while each process had 30 s. The timeout bounds
// a hang, not a speed; the duration asks for the fewest messages the
// counts allow (500 round trips, 2,500 messages of 4 KiB).
const (
	cPairDuration = 10 * time.Millisecond
	cPairTimeout  = 3 * time.Minute
)

// TestCBaselineTwoProcesses runs the C baseline's two-process pairs: every
// message arrives, and the client times its round trips.
func TestCBaselineTwoProcesses(t *testing.T) {
	bin := buildCBaseline(t)
	p := &twoProc{t: tools{cbaseline: bin, provider: "tcp", duration: cPairDuration, timeout: cPairTimeout},
		setup: map[key]setupCost{}}
	s, err := p.bandwidth(t.Context(), impl2pC, 4096)
	require.NoError(t, err)
	assert.Equal(t, uint64(bwCount2p(4096, cPairDuration)), s.Messages)
	assert.Positive(t, s.MBPerS)
	assert.Contains(t, p.setup, key{impl2pC, modeBandwidth, 4096, 0}, "the set-up pair ran first")
	pp, err := p.pingPong(t.Context(), impl2pC, 64)
	require.NoError(t, err)
	assert.Equal(t, ppCount2p(64, cPairDuration), pp.RoundTrips)
	assert.Positive(t, pp.LatMeanus)
	assert.GreaterOrEqual(t, pp.LatP99us, pp.LatP50us)

	out, err := exec.Command(bin, "bw", "--provider", "tcp", "--size", "64", "--listen", "127.0.0.1:0").CombinedOutput()
	assert.Error(t, err, "two processes need --max-count")
	assert.Contains(t, string(out), "--max-count")
}

// The busy ping-pong runs the poller --busy-poll names, busy by default;
// the default poller's ping-pong does not change with it.
func TestBusyPollSpec(t *testing.T) {
	for _, c := range []struct{ flag, want string }{{"", "busy"}, {"busy-locked", "busy-locked"}} {
		p := &twoProc{t: tools{netioPerf: "netio-perf", provider: "tcp", timeout: time.Minute}, busyPoll: c.flag}
		spec, err := p.pingPongSpec(impl2pNetioBusy, 64, 100)
		require.NoError(t, err)
		assert.Contains(t, strings.Join(spec.server.args, " "), "--poll "+c.want+" ")
		assert.Contains(t, strings.Join(spec.client("127.0.0.1:1").args, " "), "--poll "+c.want+" ")
		spec, err = p.pingPongSpec(impl2pNetio, 64, 100)
		require.NoError(t, err)
		assert.Contains(t, strings.Join(spec.client("127.0.0.1:1").args, " "), "--poll adaptive ")
	}
}
