package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The two-process comparison: every contender runs as a server process and
// a client process on 127.0.0.1, as users run them: netio-go (netio-perf
// server/client), fabtests' own fi_msg_bw and fi_msg_pingpong when they
// are found, the C baseline (cbaseline --listen/--connect), and Go's
// net.TCPConn (this program as tcp-server/tcp-client). All move the same
// count of messages per size through the same window (window2p sends in
// flight, as many receives posted); bandwidth is the receiver's figure
// (first message to last), latency the client's (one-way = RTT/2).

// Contenders of the two-process comparison. They are kept apart from the
// one-process ones (other names), so the summaries never mix the shapes.
const (
	impl2pNetio     = "netio-go-2p"      // netio-perf server/client, the default poller
	impl2pNetioBusy = "netio-go-2p-busy" // the same with --poll busy (ping-pong only)
	implFabtests    = "fabtests"         // fi_msg_bw / fi_msg_pingpong
	impl2pC         = "c-libfabric-2p"   // cbaseline --listen / --connect
	impl2pTCP       = "go-tcp-2p"        // benchcompare tcp-server / tcp-client
)

// impl2pNetioInject is netio-perf client --inject
// (endpoint.SendConfig.Inject): bandwidth only, at sizes up to
// injectMax2p.
const impl2pNetioInject = "netio-go-2p-inject"

// impls2p lists the two-process contenders in table order, with their
// column labels; the first is the one every ratio is about.
var impls2p = []struct{ id, label string }{
	{impl2pNetio, "netio-go"},
	{implFabtests, "fabtests"},
	{impl2pC, "C"},
	{impl2pTCP, "TCP"},
}

// injectMax2p is the largest size the inject contender runs at: within
// the inject_size of every provider the comparison runs on (tcp 128,
// sockets 255).
const injectMax2p = 64

// window2p is the send window and receive depth of every two-process
// contender: fabtests' -W and the set-up.
const window2p = 64

// FabtestsEnv names the directory where fi_msg_bw and fi_msg_pingpong are
// looked for before PATH.
const FabtestsEnv = "FABTESTS_BIN"

// fabtests are the paths of fabtests' two benchmarks, empty when absent.
type fabtests struct{ bw, pingpong string }

// findFabtests looks for fi_msg_bw and fi_msg_pingpong in dir (when not
// empty), then on PATH. Both or none.
func findFabtests(dir string) fabtests {
	find := func(name string) string {
		if dir != "" {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p
			}
			return ""
		}
		p, _ := exec.LookPath(name)
		return p
	}
	f := fabtests{bw: find("fi_msg_bw"), pingpong: find("fi_msg_pingpong")}
	if f.bw == "" || f.pingpong == "" {
		return fabtests{}
	}
	return f
}

// bwCount2p is how many messages a two-process bandwidth pair moves at
// size: about d at 250 k messages/s or 5 GB/s, whichever is fewer
// messages, and at least 8 windows (fi_msg_bw wants more than one).
func bwCount2p(size int, d time.Duration) int {
	rate := min(250e3, 5e9/float64(size))
	return max(8*window2p, int(rate*d.Seconds()))
}

// ppCount2p is how many timed round trips a two-process ping-pong makes at
// size: about d/4 at a round trip of 2 × (4 µs + size at 2 GB/s), 500 to
// 20000. fabtests end by count only, and a spinning program on a busy
// machine takes milliseconds a round trip: the count keeps such a run
// within the per-process timeout.
func ppCount2p(size int, d time.Duration) int {
	rtt := 2 * (4e-6 + float64(size)/2e9)
	return min(20000, max(500, int(d.Seconds()/4/rtt)))
}

// setupCount2p is the messages of the set-up pair whose CPU time is taken
// off every bandwidth pair's (starting a process, loading the providers,
// registering the buffers cost the same whatever the count).
const setupCount2p = 8 * window2p

// twoProc runs the two-process contenders.
type twoProc struct {
	t    tools
	fab  fabtests
	self string // this program, for the Go TCP peers
	// busyPoll is netio-perf's --poll for the netio-go-2p-busy ping-pong:
	// busy, or busy-locked (no Gosched between polls; see cq.Config.LockOSThread).
	busyPoll string
	// setup holds the set-up pair of each contender and size: CPU time and
	// bytes; a bandwidth pair's CPU s/GB is what it used beyond that.
	setup map[key]setupCost
}

// setupCost is what a set-up pair used.
type setupCost struct {
	cpu   time.Duration
	bytes float64
}

// contenders returns the two-process contenders present, each measuring
// bandwidth and ping-pong at one size.
func (p *twoProc) contenders() []contender {
	both := []string{modeBandwidth, modePingPong}
	cs := []contender{{impl: impl2pNetio, modes: both}, {impl: impl2pNetioBusy, modes: []string{modePingPong}},
		{impl: impl2pC, modes: both}, {impl: impl2pTCP, modes: both},
		{impl: impl2pNetioInject, modes: []string{modeBandwidth}, runs: func(size int) bool { return size <= injectMax2p }}}
	if p.fab.bw != "" {
		cs = append(cs, contender{impl: implFabtests, modes: both})
	}
	for i := range cs {
		impl := cs[i].impl
		cs[i].measure = func(ctx context.Context, size int) ([]sample, error) { return p.measure(ctx, impl, size) }
	}
	return cs
}

// measure runs one contender's pairs at one size.
func (p *twoProc) measure(ctx context.Context, impl string, size int) ([]sample, error) {
	var out []sample
	if impl != impl2pNetioBusy {
		bw, err := p.bandwidth(ctx, impl, size)
		if err != nil {
			return nil, err
		}
		out = append(out, bw)
	}
	if impl == impl2pNetioInject {
		return out, nil
	}
	pp, err := p.pingPong(ctx, impl, size)
	if err != nil {
		return nil, err
	}
	return append(out, pp), nil
}

// bandwidth runs the set-up pair once per contender and size, then the
// measured one.
func (p *twoProc) bandwidth(ctx context.Context, impl string, size int) (sample, error) {
	k := key{impl, modeBandwidth, size, 0}
	if _, ok := p.setup[k]; !ok {
		_, o, err := p.bandwidthPair(ctx, impl, size, setupCount2p)
		if err != nil {
			return sample{}, fmt.Errorf("set-up pair: %w", err)
		}
		p.setup[k] = setupCost{cpu: o.cpu, bytes: float64(setupCount2p) * float64(size)}
	}
	s, o, err := p.bandwidthPair(ctx, impl, size, bwCount2p(size, p.t.duration))
	if err != nil {
		return s, err
	}
	base := p.setup[k]
	if cpu, bytes := o.cpu-base.cpu, float64(s.Messages)*float64(size)-base.bytes; cpu > 0 && bytes > 0 {
		s.CPUSecPerGB = cpu.Seconds() / (bytes / 1e9)
	}
	return s, nil
}

// bandwidthPair moves count messages of size and reads the receiver's
// figures.
func (p *twoProc) bandwidthPair(ctx context.Context, impl string, size, count int) (sample, pairOutput, error) {
	spec, err := p.bandwidthSpec(impl, size, count)
	if err != nil {
		return sample{}, pairOutput{}, err
	}
	o, err := p.t.runPair(ctx, spec)
	if err != nil {
		return sample{}, o, err
	}
	row, err := p.parse(impl, o.server)
	if err != nil {
		return sample{}, o, fmt.Errorf("%s: %w", spec.server, err)
	}
	if row.Messages != uint64(count) {
		return sample{}, o, fmt.Errorf("%s: received %d messages of %d", spec.server, row.Messages, count)
	}
	row.Size, row.Connections = size, 0 // netio-perf's server counts its connections
	return row.bandwidth(impl, modeBandwidth), o, nil
}

// pingPong bounces one message and reads the client's latencies.
func (p *twoProc) pingPong(ctx context.Context, impl string, size int) (sample, error) {
	count := ppCount2p(size, p.t.duration)
	spec, err := p.pingPongSpec(impl, size, count)
	if err != nil {
		return sample{}, err
	}
	o, err := p.t.runPair(ctx, spec)
	if err != nil {
		return sample{}, err
	}
	row, err := p.parse(impl, o.client)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", spec.client("ADDR"), err)
	}
	row.Size = size
	return row.pingPong(impl), nil
}

// parse reads a side's figures: fabtests' machine-readable line, or the
// JSON last line of the others.
func (p *twoProc) parse(impl string, out []byte) (perfRow, error) {
	if impl == implFabtests {
		return parseFabtests(out)
	}
	var row perfRow
	err := unmarshalLastLine(out, &row)
	return row, err
}

// bandwidthSpec is the pair that streams count messages of size.
func (p *twoProc) bandwidthSpec(impl string, size, count int) (pairSpec, error) {
	t, n, s, w := p.t, strconv.Itoa(count), strconv.Itoa(size), strconv.Itoa(window2p)
	timeout := strconv.Itoa(int(t.timeout.Seconds()))
	switch impl {
	case impl2pNetio, impl2pNetioInject:
		var inject []string
		if impl == impl2pNetioInject {
			inject = []string{"--inject"}
		}
		return pairSpec{
			server: command{t.netioPerf, []string{"server", "--provider", t.provider, "--listen", "127.0.0.1:0",
				"--buf-size", s, "--bufs", w, "--count", n, "--json", "--timeout", t.timeout.String()}},
			client: func(a string) command {
				return command{t.netioPerf, append([]string{"client", "--provider", t.provider, "--connect", a,
					"--size", s, "--bufs", w, "--count", n, "--json", "--timeout", t.timeout.String()}, inject...)}
			}}, nil
	case impl2pC:
		return pairSpec{
			server: command{t.cbaseline, []string{"bw", "--provider", t.provider, "--size", s, "--rx-depth", w,
				"--max-count", n, "--listen", "127.0.0.1:0", "--timeout", timeout}},
			client: func(a string) command {
				return command{t.cbaseline, []string{"bw", "--provider", t.provider, "--size", s, "--window", w,
					"--max-count", n, "--connect", a, "--timeout", timeout}}
			}}, nil
	case impl2pTCP:
		return p.tcpSpec(modeBandwidth, s, n), nil
	case implFabtests:
		return p.fabtestsSpec(p.fab.bw, s, n)
	}
	return pairSpec{}, fmt.Errorf("no two-process bandwidth pair for %s", impl)
}

// pingPongSpec is the pair that times count round trips of size.
func (p *twoProc) pingPongSpec(impl string, size, count int) (pairSpec, error) {
	t, n, s := p.t, strconv.Itoa(count), strconv.Itoa(size)
	timeout := strconv.Itoa(int(t.timeout.Seconds()))
	switch impl {
	case impl2pNetio, impl2pNetioBusy:
		poll := "adaptive"
		if impl == impl2pNetioBusy {
			poll = cmp.Or(p.busyPoll, "busy")
		}
		return pairSpec{
			server: command{t.netioPerf, []string{"server", "--mode", "pingpong", "--provider", t.provider,
				"--listen", "127.0.0.1:0", "--buf-size", strconv.Itoa(max(size, 256)), "--poll", poll,
				"--json", "--timeout", t.timeout.String()}},
			client: func(a string) command {
				return command{t.netioPerf, []string{"client", "--mode", "pingpong", "--provider", t.provider,
					"--connect", a, "--size", s, "--iterations", n, "--poll", poll, "--json", "--timeout", t.timeout.String()}}
			}}, nil
	case impl2pC:
		return pairSpec{
			server: command{t.cbaseline, []string{"pingpong", "--provider", t.provider, "--size", s,
				"--max-count", n, "--listen", "127.0.0.1:0", "--timeout", timeout}},
			client: func(a string) command {
				return command{t.cbaseline, []string{"pingpong", "--provider", t.provider, "--size", s,
					"--max-count", n, "--connect", a, "--timeout", timeout}}
			}}, nil
	case impl2pTCP:
		return p.tcpSpec(modePingPong, s, n), nil
	case implFabtests:
		return p.fabtestsSpec(p.fab.pingpong, s, n)
	}
	return pairSpec{}, fmt.Errorf("no two-process ping-pong pair for %s", impl)
}

// tcpSpec is the Go TCP pair: this program as tcp-server and tcp-client.
func (p *twoProc) tcpSpec(mode, size, count string) pairSpec {
	timeout := p.t.timeout.String()
	return pairSpec{
		server: command{p.self, []string{roleTCPServer, "--mode", mode, "--size", size, "--timeout", timeout}},
		client: func(a string) command {
			return command{p.self, []string{roleTCPClient, "--mode", mode, "--size", size, "--count", count,
				"--connect", a, "--timeout", timeout}}
		}}
}

// fabtestsSpec is a fabtests pair on a free port (fabtests prints no
// address): -W window2p, -I count, machine-readable output.
func (p *twoProc) fabtestsSpec(prog, size, count string) (pairSpec, error) {
	port, err := freePort()
	if err != nil {
		return pairSpec{}, err
	}
	common := []string{"-p", p.t.provider, "-s", "127.0.0.1", "-S", size, "-W", strconv.Itoa(window2p), "-I", count, "-m"}
	return pairSpec{
		port:   port,
		server: command{prog, append(common, "-B", strconv.Itoa(port))},
		client: func(string) command {
			return command{prog, append(append([]string{}, common...), "-P", strconv.Itoa(port), "127.0.0.1")}
		}}, nil
}

// parseFabtests reads fabtests' machine-readable result line
// ("- { xfer_size: S, iterations: N, total: B, time: T, MB/sec: X,
// usec/xfer: U, Mxfers/sec: M }"). MB/sec is 10^6 bytes a second;
// usec/xfer of a ping-pong is the mean one-way latency.
func parseFabtests(out []byte) (perfRow, error) {
	for _, line := range strings.Split(string(out), "\n") {
		body, ok := strings.CutPrefix(strings.TrimSpace(line), "- {")
		if !ok {
			continue
		}
		fields := map[string]float64{}
		for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimSpace(body), "}"), ",") {
			k, v, ok := strings.Cut(kv, ":")
			if !ok {
				continue
			}
			if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				fields[strings.TrimSpace(k)] = x
			}
		}
		n, secs, mbps, us := fields["iterations"], fields["time"], fields["MB/sec"], fields["usec/xfer"]
		if n <= 0 || secs <= 0 || mbps <= 0 || us <= 0 {
			return perfRow{}, fmt.Errorf("fabtests line %q: want iterations, time, MB/sec and usec/xfer", line)
		}
		return perfRow{Size: int(fields["xfer_size"]), Messages: uint64(n), Seconds: secs, MBPerS: mbps,
			MsgsPerS: n / secs, RoundTrips: int(n), LatMeanus: us}, nil
	}
	return perfRow{}, fmt.Errorf("no fabtests result line in %q", lastLine(out))
}

// report summarizes the two-process samples. Ratios by round and the TCP
// modes are read against fabtests, or the C baseline when fabtests is
// absent.
func (p *twoProc) report(samples []sample, sizes []int, rounds int) *twoProcReport {
	r := &twoProcReport{Rounds: rounds, Window: window2p, Reference: impl2pC, BusyPoll: cmp.Or(p.busyPoll, "busy")}
	if p.fab.bw != "" {
		r.Fabtests, r.Reference = filepath.Dir(p.fab.bw), implFabtests
	}
	r.Rows = summarizeTwoProc(samples, sizes, rounds, r.Reference)
	return r
}
