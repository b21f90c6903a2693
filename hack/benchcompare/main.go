// Command benchcompare measures netio-go against a C program on plain
// libfabric (hack/cbaseline) and against Go's net.TCPConn, plain and with
// bufio, in one run on 127.0.0.1, and prints netio-go's ratios to each.
// hack/bench-compare (make bench) builds the programs and runs it.
//
//	benchcompare [--provider tcp|sockets] [--rounds N] [--sizes LIST] [--duration D]
//	             [--scale-size S] [--conns LIST] [--json FILE] [--plot FILE] [--timeout D]
//	             [--netio-perf PATH] [--cbaseline PATH] [--raw-go PATH]
//
// Every round measures every size with every implementation, the order of
// the implementations rotating from size to size and round to round, so
// that slow phases of a noisy machine spread over all of them; the tables
// show medians over the rounds. Modes: bandwidth (a window of messages one
// way: MB/s, Mmsg/s and CPU s/GB) and ping-pong (one-way latency, RTT/2).
// Each round also runs netio-perf --mode scale (N connections into one
// receiver) and asks netio-perf for coalesced 64 B messages (--mode
// coalesce), printed as "n/a (not built)" while it has no such mode.
//
// netio-go and C run their sender and receiver in one process over one
// domain, with the same send window and receive depth per size (netio-go's
// ping-pong runs over two connections, one each way, because its endpoints
// either send or receive; C and TCP bounce over one), both
// polling their completion queues. C runs twice: spinning on fi_cq_read
// ("C", the baseline of the targets), and calling sched_yield()
// after each empty poll ("C+yield"), as netio-go's pollers yield while they
// spin. Pure spinning is the faster of the two on a quiet machine; on a
// loaded one its threads lose whole time slices to other work (and the
// sockets provider's progress thread starves), which is why the header
// prints the load average. The Go TCP runs happen in this process.
// At 64 KiB and 1 MiB on tcp each round also runs raw Go: the fabric
// package's BenchmarkRawStream, a Go program in C's exact bandwidth shape
// with no netio code. Where it falls short of C, Go itself (cgo calls, the
// runtime's threads) gives that much up on the machine, so that a gap
// between netio-go and C splits into the library's share and Go's,
// measured in the same run. Under the bandwidth table it prints, per size,
// netio-go's and C's lowest and highest figure and their ratio in each
// round: rounds are interleaved, so per-round ratios that straddle 1 say
// that the median ratio is the machine's noise, not a difference.
// The raw numbers of every round, the medians and the ratios go
// to the JSON file, and a picture of the medians (bandwidth and one-way
// latency against message size, one line per program) to --plot. The exit
// status is 1 when a measurement failed (its cells say "failed"; the rest
// is still printed and written) or the picture could not be drawn, 2 on a
// usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netio-go/netio/internal/perfplot"
)

// config is the command line.
type config struct {
	busyPoll  string // netio-perf --poll of the busy two-process ping-pong
	provider  string
	rounds    int
	sizes     []int
	duration  time.Duration
	scaleSize int
	conns     []int
	jsonPath  string
	plotPath  string // picture drawn from the JSON file (plot.go); "" for none
	timeout   time.Duration
	netioPerf string
	cbaseline string
	rawGo     string
	// The two-process comparison: its rounds (0: none), where fabtests'
	// benchmarks are, and whether the one-process part runs too.
	twoRounds   int
	fabtestsDir string
	oneProcess  bool
}

// parseConfig parses the command line; errors are usage errors.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("benchcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.provider, "provider", "tcp", "libfabric provider for netio-go and C: tcp or sockets")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; the tables show medians over them")
	sizes := fs.String("sizes", "64,1K,4K,64K,1M", "message sizes")
	fs.DurationVar(&c.duration, "duration", time.Second, "length of each measurement (a bandwidth run, a ping-pong)")
	scaleSize := fs.String("scale-size", "4K", "message size of the scaling runs")
	conns := fs.String("conns", "1,4,16,64", "connection counts of the scaling runs")
	fs.StringVar(&c.jsonPath, "json", "bench-compare.json", "file for the raw numbers of every round, the medians and the ratios")
	fs.StringVar(&c.plotPath, "plot", "bench-compare.png", "picture of the JSON file: bandwidth and one-way latency against message size, one line per program (.svg or .png; empty: none)")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "limit for each process the harness starts")
	fs.StringVar(&c.netioPerf, "netio-perf", "bin/netio-perf", "netio-perf binary")
	fs.StringVar(&c.cbaseline, "cbaseline", "bin/cbaseline", "C baseline binary (hack/cbaseline)")
	fs.IntVar(&c.twoRounds, "two-process-rounds", 7, "rounds of the two-process comparison (every contender as a server and a client process); 0: skip it")
	fs.StringVar(&c.fabtestsDir, "fabtests", os.Getenv(FabtestsEnv), "directory of fabtests' fi_msg_bw and fi_msg_pingpong (default $"+FabtestsEnv+"; empty: looked up on PATH)")
	fs.StringVar(&c.busyPoll, "busy-poll", "busy", "netio-perf --poll of the second two-process ping-pong (netio-go-2p-busy): busy or busy-locked")
	fs.BoolVar(&c.oneProcess, "one-process", true, "also run the one-process comparison (--rounds rounds)")
	fs.StringVar(&c.rawGo, "raw-go", "bin/fabric.test", "the fabric package's test binary (go test -c ./fabric), whose BenchmarkRawStream (a Go program in C's shape, no netio code) runs at 64 KiB and 1 MiB on tcp; empty: skip it")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := c.check(*sizes, *scaleSize, *conns); err != nil {
		return c, err
	}
	return c, nil
}

// check validates the flags and parses the lists.
func (c *config) check(sizes, scaleSize, conns string) error {
	var err error
	switch {
	case c.provider != "tcp" && c.provider != "sockets":
		return fmt.Errorf("--provider %q: want tcp or sockets", c.provider)
	case c.busyPoll != "busy" && c.busyPoll != "busy-locked":
		return fmt.Errorf("--busy-poll %q: want busy or busy-locked", c.busyPoll)
	case c.rounds < 1 || c.rounds > 100:
		return fmt.Errorf("--rounds %d: want 1..100", c.rounds)
	case c.twoRounds < 0 || c.twoRounds > 100:
		return fmt.Errorf("--two-process-rounds %d: want 0..100", c.twoRounds)
	case c.twoRounds == 0 && !c.oneProcess:
		return errors.New("--two-process-rounds 0 and --one-process=false: nothing to run")
	case c.duration < 10*time.Millisecond || c.duration > 10*time.Second:
		return fmt.Errorf("--duration %v: want 10ms..10s", c.duration)
	case c.timeout < c.duration+5*time.Second:
		return fmt.Errorf("--timeout %v: want at least --duration + 5s", c.timeout)
	case c.jsonPath == "":
		return errors.New("--json: want a file name")
	}
	if c.plotPath != "" {
		if _, err := perfplot.CheckPath(c.plotPath); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if c.sizes, err = parseList(sizes, parseSize); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	if c.scaleSize, err = parseSize(scaleSize); err != nil {
		return fmt.Errorf("--scale-size: %w", err)
	}
	if c.conns, err = parseList(conns, parseConns); err != nil {
		return fmt.Errorf("--conns: %w", err)
	}
	return nil
}

// parseSize parses a message size in bytes, with an optional K or M
// (binary) suffix: 64, 4K, 1M. Sizes run from 1 byte to 64 MiB.
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		s, mult = strings.TrimSuffix(s, "K"), 1<<10
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1<<20
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n*mult > 64<<20 {
		return 0, fmt.Errorf("bad size %q: want 1..64M bytes, e.g. 64, 4K, 1M", s)
	}
	return n * mult, nil
}

// parseConns parses a connection count, 1..256.
func parseConns(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 256 {
		return 0, fmt.Errorf("bad connection count %q: want 1..256", s)
	}
	return n, nil
}

// parseList parses a comma-separated list with parse.
func parseList(s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := parse(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var code int
	if len(os.Args) > 1 && (os.Args[1] == roleTCPServer || os.Args[1] == roleTCPClient) {
		code = runTCPPeer(ctx, os.Args[1], os.Args[2:], os.Stdout, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// run parses the command line, measures, prints and writes the report, and
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchcompare: %v\n", err)
		return 2
	}
	r := newBench(c, stderr).run(ctx)
	if err := printReport(stdout, r); err != nil {
		fmt.Fprintf(stderr, "benchcompare: %v\n", err)
		return 1
	}
	if err := writeJSON(c.jsonPath, r); err != nil {
		fmt.Fprintf(stderr, "benchcompare: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "\nwall time %s; raw numbers of every round in %s\n", time.Duration(r.WallSeconds*float64(time.Second)).Round(time.Second), c.jsonPath)
	code := 0
	if c.plotPath != "" {
		if err := writePlot(c.jsonPath, c.plotPath); err != nil {
			fmt.Fprintf(stderr, "benchcompare: %v\n", err)
			code = 1
		} else {
			fmt.Fprintf(stdout, "picture of the medians in %s\n", c.plotPath)
		}
	}
	if r.Failures > 0 {
		fmt.Fprintf(stderr, "benchcompare: %d measurements failed (see the errors above and in %s)\n", r.Failures, c.jsonPath)
		return 1
	}
	return code
}
