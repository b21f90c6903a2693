package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// exitUsage is netio-perf's exit status for a command line it does not
// take, which is how an unknown --mode shows.
const exitUsage = 2

// coalesceMode is the netio-perf sweep mode the coalesced row asks for:
// `netio-perf --mode coalesce --sizes 64 --duration D --json` must print a
// sweep report whose one row's msgs_per_s counts 64 B messages end to end
// (sender to the receiver's callback), with netio-perf's defaults for the
// coalescing (64 KiB buffers, 1 ms flush interval, 4 buffers in flight).
// A netio-perf built before it had the mode exits with exitUsage, and the
// row reads "n/a (not built)".
const coalesceMode = "coalesce"

// window is the send window and the receive depth a size runs with, the
// same for netio-go and C.
type window struct {
	Send    int `json:"send"`
	Receive int `json:"receive"`
}

// windowFor returns netio-perf's default for a size: about 8 MiB in flight,
// 16..128 messages, and twice that many receives posted (at most 256, the
// tcp provider's receive queue).
func windowFor(size int) window {
	send := max(16, min(128, (8<<20)/size))
	return window{Send: send, Receive: min(2*send, 256)}
}

// perfRow is the part of a netio-perf sweep row the harness reads.
type perfRow struct {
	Size        int     `json:"size"`
	Connections int     `json:"connections"`
	Messages    uint64  `json:"messages"`
	Seconds     float64 `json:"seconds"`
	MBPerS      float64 `json:"mb_per_s"`
	MsgsPerS    float64 `json:"msgs_per_s"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb"`
	RoundTrips  int     `json:"round_trips"`
	LatP50us    float64 `json:"latency_p50_us"`
	LatP99us    float64 `json:"latency_p99_us"`
	LatMeanus   float64 `json:"latency_mean_us"` // two-process ping-pongs
}

// bandwidth returns the row's throughput part as a sample.
func (r perfRow) bandwidth(impl, mode string) sample {
	return sample{Impl: impl, Mode: mode, Size: r.Size, Connections: r.Connections, Messages: r.Messages,
		Seconds: r.Seconds, MBPerS: r.MBPerS, MsgsPerS: r.MsgsPerS, CPUSecPerGB: r.CPUSecPerGB}
}

// pingPong returns the row's latency part as a sample.
func (r perfRow) pingPong(impl string) sample {
	return sample{Impl: impl, Mode: modePingPong, Size: r.Size, RoundTrips: r.RoundTrips,
		LatP50us: r.LatP50us, LatP99us: r.LatP99us, LatMeanus: r.LatMeanus}
}

// perfReport is netio-perf's sweep JSON.
type perfReport struct {
	Rows []perfRow `json:"rows"`
}

// tools runs the measuring programs.
type tools struct {
	netioPerf, cbaseline string
	fabricTest           string // the fabric package's test binary (go test -c), for raw Go; "" skips it
	provider             string
	duration             time.Duration
	timeout              time.Duration // per process
}

// netio measures netio-go at one size: netio-perf's loopback sweep, its
// throughput part and its ping-pong.
func (t tools) netio(ctx context.Context, size int) ([]sample, error) {
	w := windowFor(size)
	var rep perfReport
	err := t.runJSON(ctx, &rep, t.netioPerf, "--provider", t.provider, "--sizes", strconv.Itoa(size),
		"--duration", t.duration.String(), "--window", strconv.Itoa(w.Send), "--rx-bufs", strconv.Itoa(w.Receive), "--json")
	if err != nil {
		return nil, err
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Size != size {
		return nil, fmt.Errorf("netio-perf: want one row of %d B, got %+v", size, rep.Rows)
	}
	r := rep.Rows[0]
	return []sample{r.bandwidth(implNetio, modeBandwidth), r.pingPong(implNetio)}, nil
}

// scale measures netio-go with each connection count into one receiver.
func (t tools) scale(ctx context.Context, size int, conns []int) ([]sample, error) {
	list := make([]string, len(conns))
	for i, c := range conns {
		list[i] = strconv.Itoa(c)
	}
	var rep perfReport
	err := t.runJSON(ctx, &rep, t.netioPerf, "--provider", t.provider, "--mode", "scale", "--sizes", strconv.Itoa(size),
		"--conns", strings.Join(list, ","), "--duration", t.duration.String(), "--json")
	if err != nil {
		return nil, err
	}
	if len(rep.Rows) != len(conns) {
		return nil, fmt.Errorf("netio-perf --mode scale: want %d rows, got %d", len(conns), len(rep.Rows))
	}
	out := make([]sample, len(rep.Rows))
	for i, r := range rep.Rows {
		out[i] = r.bandwidth(implNetio, modeScale)
	}
	return out, nil
}

// coalesced measures netio-go's coalesced 64 B messages. A netio-perf
// without the mode gives a NotBuilt sample, not an error.
func (t tools) coalesced(ctx context.Context) (sample, error) {
	var rep perfReport
	err := t.runJSON(ctx, &rep, t.netioPerf, "--provider", t.provider, "--mode", coalesceMode,
		"--sizes", strconv.Itoa(coalescedSize), "--duration", t.duration.String(), "--json")
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == exitUsage {
		return sample{Impl: implNetio, Mode: modeCoalesced, Size: coalescedSize, NotBuilt: true}, nil
	}
	if err != nil {
		return sample{}, err
	}
	if len(rep.Rows) != 1 {
		return sample{}, fmt.Errorf("netio-perf --mode %s: want one row, got %d", coalesceMode, len(rep.Rows))
	}
	return rep.Rows[0].bandwidth(implNetio, modeCoalesced), nil
}

// c measures the C baseline at one size: bandwidth, then ping-pong, each a
// process of its own. With yield it calls sched_yield() after every empty
// poll.
func (t tools) c(ctx context.Context, size int, yield bool) ([]sample, error) {
	w := windowFor(size)
	common := []string{"--provider", t.provider, "--size", strconv.Itoa(size),
		"--seconds", strconv.FormatFloat(t.duration.Seconds(), 'f', -1, 64),
		"--timeout", strconv.Itoa(int(t.timeout.Seconds()))}
	impl := implC
	if yield {
		impl, common = implCYield, append(common, "--yield")
	}
	var bw, pp perfRow
	args := append([]string{"bw", "--window", strconv.Itoa(w.Send), "--rx-depth", strconv.Itoa(w.Receive)}, common...)
	if err := t.runJSON(ctx, &bw, t.cbaseline, args...); err != nil {
		return nil, err
	}
	if err := t.runJSON(ctx, &pp, t.cbaseline, append([]string{"pingpong"}, common...)...); err != nil {
		return nil, err
	}
	return []sample{bw.bandwidth(impl, modeBandwidth), pp.pingPong(impl)}, nil
}

// rawGoBench names the sub-benchmarks of the fabric package's
// BenchmarkRawStream (a Go program in the C baseline's shape, no netio code)
// by the message size they stream; raw Go exists at these sizes.
var rawGoBench = map[int]string{64 << 10: "64KiB", 1 << 20: "1024KiB"}

// hasRawGo reports whether raw Go is measured at size: a
// benchmark exists for it and the provider is tcp, the one it runs on.
func (t tools) hasRawGo(size int) bool {
	_, ok := rawGoBench[size]
	return ok && t.fabricTest != "" && t.provider == "tcp"
}

// rawGo measures raw Go at one size: BenchmarkRawStream of the
// fabric package's test binary, for about the duration.
func (t tools) rawGo(ctx context.Context, size int) ([]sample, error) {
	sub, ok := rawGoBench[size]
	if !ok {
		return nil, fmt.Errorf("raw go: no raw stream benchmark of %d B", size)
	}
	args := []string{"-test.run", "^$", "-test.bench", "^BenchmarkRawStream$/^" + sub + "$",
		"-test.benchtime", t.duration.String()}
	out, err := t.run(ctx, t.fabricTest, args...)
	if err != nil {
		return nil, err
	}
	s, err := parseRawStream(out, sub, size)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t.fabricTest, strings.Join(args, " "), err)
	}
	return []sample{s}, nil
}

// parseRawStream reads the result line of BenchmarkRawStream/sub from go
// test output: iterations, then value-unit pairs (ns/op, MB/s, cpu-s/GB,
// ...).
func parseRawStream(out []byte, sub string, size int) (sample, error) {
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		// "BenchmarkRawStream/64KiB-2": GOMAXPROCS after the dash.
		if name, _, _ := strings.Cut(f[0], "-"); name != "BenchmarkRawStream/"+sub {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return sample{}, fmt.Errorf("result line %q: iterations: %w", line, err)
		}
		unit := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				unit[f[i+1]] = v
			}
		}
		if n == 0 || unit["ns/op"] <= 0 || unit["MB/s"] <= 0 {
			return sample{}, fmt.Errorf("result line %q: want iterations, ns/op and MB/s", line)
		}
		return sample{Impl: implRawGo, Mode: modeBandwidth, Size: size, Messages: n,
			Seconds: float64(n) * unit["ns/op"] / 1e9, MBPerS: unit["MB/s"],
			MsgsPerS: unit["MB/s"] * 1e6 / float64(size), CPUSecPerGB: unit["cpu-s/GB"]}, nil
	}
	return sample{}, fmt.Errorf("no result line for BenchmarkRawStream/%s in %q", sub, lastLine(out))
}

// runJSON runs a program and decodes the last line of its standard output
// into v.
func (t tools) runJSON(ctx context.Context, v any, prog string, args ...string) error {
	out, err := t.run(ctx, prog, args...)
	if err != nil {
		return err
	}
	if err := unmarshalLastLine(out, v); err != nil {
		return fmt.Errorf("%s %s: %w", prog, strings.Join(args, " "), err)
	}
	return nil
}

// unmarshalLastLine decodes the last line of out into v.
func unmarshalLastLine(out []byte, v any) error {
	line := lastLine(out)
	if err := json.Unmarshal([]byte(line), v); err != nil {
		return fmt.Errorf("last line %q: %w", line, err)
	}
	return nil
}

// run runs a program with the per-process timeout and returns its standard
// output. A failure carries the end of its standard error, or of its
// standard output when it wrote nothing to standard error (a go test
// binary reports a failed benchmark there).
func (t tools) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		why := stderr.Bytes()
		if len(bytes.TrimSpace(why)) == 0 {
			why = lastLines(stdout.Bytes(), 4)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, lastLine(why))
	}
	return stdout.Bytes(), nil
}

// lastLines returns the last n lines of out on one line, "; " between
// them.
func lastLines(out []byte, n int) []byte {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return []byte(strings.Join(lines[max(0, len(lines)-n):], "; "))
}

// lastLine returns the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
