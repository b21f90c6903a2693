package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/internal/perfplot"
)

// errUsage marks a command-line error: the caller prints the usage and exits
// with exitUsage.
var errUsage = errors.New("usage error")

// Sizes in the suffixes parseSize accepts.
const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// parseSize parses a byte count: a plain number, or one with a binary
// suffix K, KiB, M, MiB, G or GiB (case-insensitive), e.g. "4096", "4K",
// "1MiB".
func parseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, suf := range []struct {
		text string
		mult int
	}{{"kib", kib}, {"mib", mib}, {"gib", gib}, {"k", kib}, {"m", mib}, {"g", gib}, {"b", 1}} {
		if strings.HasSuffix(t, suf.text) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, suf.text)), suf.mult
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 31)
	if err != nil || n == 0 || int64(n)*int64(mult) > gib {
		return 0, fmt.Errorf("bad size %q: want a number of bytes in 1..1GiB, e.g. 4096 or 64K", s)
	}
	return int(n) * mult, nil
}

// parseSizes parses a comma-separated list of sizes.
func parseSizes(s string) ([]int, error) { return parseList(s, parseSize) }

// parseCounts parses a comma-separated list of counts in 1..most, e.g.
// "1,4,16,64".
func parseCounts(s string, most int) ([]int, error) {
	return parseList(s, func(part string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > most {
			return 0, fmt.Errorf("bad count %q: want a number in 1..%d", part, most)
		}
		return n, nil
	})
}

// parseList parses a comma-separated list, each element with parse.
func parseList(s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// formatSize renders a size the way the sweep table shows it: "64 B",
// "4 KiB", "1 MiB", or plain bytes when it is not a whole multiple (the
// plot's tick labels, one implementation).
func formatSize(n int) string { return perfplot.FormatSize(n) }

// sizeFlag is a flag.Value for a byte count in parseSize's syntax.
type sizeFlag struct{ n *int }

func (f sizeFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.Itoa(*f.n)
}

func (f sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// hostPort is a parsed "IP:PORT" address.
type hostPort struct {
	IP   string
	Port int
}

func (a hostPort) String() string { return net.JoinHostPort(a.IP, strconv.Itoa(a.Port)) }

// parseHostPort parses "HOST:PORT" where HOST is an IP address or
// "localhost" (taken as 127.0.0.1). Port 0 is accepted only when allowZero.
func parseHostPort(s string, allowZero bool) (hostPort, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return hostPort{}, fmt.Errorf("bad address %q: want IP:PORT, e.g. 127.0.0.1:7000", s)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return hostPort{}, fmt.Errorf("bad address %q: %q is not an IP address", s, host)
	}
	lowest := uint64(1)
	if allowZero {
		lowest = 0
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n < lowest {
		return hostPort{}, fmt.Errorf("bad address %q: port must be a number in %d..65535", s, lowest)
	}
	return hostPort{IP: ip.String(), Port: int(n)}, nil
}

// pollMode selects how the completion pollers wait for work.
type pollMode string

// Poll modes.
const (
	pollAdaptive pollMode = "adaptive" // spin briefly, then sleep on the queues' fds
	pollBlock    pollMode = "block"    // sleep on the fds at once
	pollBusy     pollMode = "busy"     // never sleep (yield between polls)
	// never sleep, on a locked OS thread (cq.Config.LockOSThread): no
	// runtime.Gosched between polls, the lowest small-message latency
	pollBusyLocked pollMode = "busy-locked"
)

func (m *pollMode) String() string { return string(*m) }

func (m *pollMode) Set(s string) error {
	switch pollMode(s) {
	case pollAdaptive, pollBlock, pollBusy, pollBusyLocked:
		*m = pollMode(s)
		return nil
	}
	return fmt.Errorf("want adaptive, block, busy or busy-locked")
}

// config returns the poller configuration of the mode.
func (m pollMode) config() cq.Config {
	switch m {
	case pollBlock:
		return cq.Config{Mode: cq.Adaptive, SpinBudget: -1}
	case pollBusy:
		return cq.Config{Mode: cq.BusyPoll}
	case pollBusyLocked:
		return cq.Config{Mode: cq.BusyPoll, LockOSThread: true}
	default:
		return cq.Config{Mode: cq.Adaptive}
	}
}

// commonFlags are the flags every mode has.
type commonFlags struct {
	metricsFlags // --metrics-addr (metrics.go)

	provider string
	json     bool
	poll     pollMode
	logLevel logLevel // --log-level (logging.go)
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	c.poll = pollAdaptive
	c.registerMetrics(fs)
	fs.StringVar(&c.provider, "provider", "tcp", "libfabric provider (tcp, sockets, ...)")
	fs.BoolVar(&c.json, "json", false, "print one JSON object as the last line")
	fs.Var(&c.poll, "poll", "how pollers wait: adaptive (spin briefly, then sleep), block (sleep at once), busy (never sleep) or busy-locked (busy on a locked OS thread, no Gosched between polls: the lowest small-message latency when GOMAXPROCS exceeds the pollers)")
	c.logLevel.register(fs)
}

// cmdLine is the flag set of one mode together with its usage text.
type cmdLine struct {
	*flag.FlagSet
	synopsis string
	w        io.Writer // where usage and errors go
}

// newCmdLine returns an empty command line for mode; errors and the usage
// are printed to w by parse and fail, not by the flag package.
func newCmdLine(mode, synopsis string, w io.Writer) *cmdLine {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdLine{FlagSet: fs, synopsis: synopsis, w: w}
}

// usage prints the synopsis and the flags.
func (c *cmdLine) usage() {
	fmt.Fprintf(c.w, "usage: %s\n\nflags:\n", c.synopsis)
	c.SetOutput(c.w)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
}

// parse parses args and rejects positional arguments. -h prints the usage
// and returns flag.ErrHelp; errors go through fail.
func (c *cmdLine) parse(args []string) error {
	if err := c.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage()
			return err
		}
		return c.fail(err)
	}
	if c.NArg() > 0 {
		return c.fail(fmt.Errorf("unexpected argument %q", c.Arg(0)))
	}
	return nil
}

// isSet reports whether the flag was given on the command line.
func (c *cmdLine) isSet(name string) bool {
	set := false
	c.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// fail prints err and the usage, and returns err wrapped in errUsage.
func (c *cmdLine) fail(err error) error {
	fmt.Fprintf(c.w, "netio-perf %s: %v\n", c.Name(), err)
	c.usage()
	return fmt.Errorf("%w: %w", errUsage, err)
}
