package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

const sweepSynopsis = "netio-perf [--provider P] [--mode send|rma-read|rma-write] [--sizes LIST] [--quick] [--zero-copy] [--json]"

// defaultSweepSizes are the message sizes of the sweep.
var defaultSweepSizes = []int{64, kib, 4 * kib, 64 * kib, mib}

// sweepOptions are the sweep's flags.
type sweepOptions struct {
	commonFlags
	sizes    []int
	quick    bool
	zeroCopy bool
	mode     string
}

// budget bounds one part of the sweep for one size, by time and by count.
type budget struct {
	throughput    time.Duration
	maxBytes      int64 // throughput part: at most this many bytes...
	maxMessages   uint64
	pingPong      time.Duration
	maxRoundTrips int
}

// budgets for the full sweep (≈ 3.5 s per size) and for --quick (tests).
var (
	fullBudget  = budget{throughput: 2 * time.Second, maxBytes: 8 << 30, maxMessages: 4 << 20, pingPong: time.Second, maxRoundTrips: 100000}
	quickBudget = budget{throughput: 200 * time.Millisecond, maxBytes: 1 << 30, maxMessages: 1 << 20, pingPong: 100 * time.Millisecond, maxRoundTrips: 10000}
)

// messages returns the message bound of the throughput part for a size.
func (b budget) messages(size int) uint64 {
	return min(b.maxMessages, uint64(b.maxBytes/int64(size)))
}

// parseSweepFlags parses the sweep's command line.
func parseSweepFlags(args []string, stderr io.Writer) (sweepOptions, error) {
	o := sweepOptions{sizes: defaultSweepSizes}
	fs := newCmdLine("sweep", sweepSynopsis, stderr)
	o.register(fs.FlagSet)
	sizes := fs.String("sizes", "", "comma-separated message sizes (default 64,1K,4K,64K,1M)")
	fs.BoolVar(&o.quick, "quick", false, "short budgets (≈0.3 s per size), for tests")
	fs.BoolVar(&o.zeroCopy, "zero-copy", false, "throughput part: send from the sender's own memory instead of copying into send buffers")
	fs.StringVar(&o.mode, "mode", modeSend, "what to measure: send (messages), rma-read (Pull) or rma-write (Push) of an exposed region")
	if err := fs.parse(args); err != nil {
		return o, err
	}
	switch o.mode {
	case modeSend, modeRMARead, modeRMAWrite:
	default:
		return o, fs.fail(fmt.Errorf("--mode %q: want send, rma-read or rma-write", o.mode))
	}
	if *sizes != "" {
		var err error
		if o.sizes, err = parseSizes(*sizes); err != nil {
			return o, fs.fail(fmt.Errorf("--sizes: %w", err))
		}
	}
	return o, nil
}

// runSweep runs the loopback sweep in this process, a server and a client
// in one domain, and prints the table (or JSON).
func runSweep(ctx context.Context, o sweepOptions, stdout, stderr io.Writer) error {
	b := fullBudget
	if o.quick {
		b = quickBudget
	}
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: "127.0.0.1"})
	if err != nil {
		return err
	}
	defer mgr.Close()
	w := sweeper{mgr: mgr, budget: b, poll: o.poll, zeroCopy: o.zeroCopy, mode: o.mode, progress: stderr}
	rows := make([]sweepRow, 0, len(o.sizes))
	for _, size := range o.sizes {
		row, err := w.measure(ctx, size)
		if err != nil {
			return fmt.Errorf("%s: %w", formatSize(size), err)
		}
		rows = append(rows, row)
	}
	if o.json {
		return printJSON(stdout, sweepReport{Role: "sweep", Provider: o.provider, Mode: o.mode, Rows: rows})
	}
	return printTable(stdout, o.provider, o.mode, rows)
}

// sweeper runs the parts of the sweep in one domain.
type sweeper struct {
	mgr      *domain.Manager
	budget   budget
	poll     pollMode
	zeroCopy bool
	mode     string
	progress io.Writer // progress lines
}

// measure measures throughput, then ping-pong latency, for one size.
func (w *sweeper) measure(ctx context.Context, size int) (sweepRow, error) {
	if w.mode != modeSend {
		return w.measureRMA(ctx, size, w.mode == modeRMAWrite)
	}
	row := sweepRow{Size: size}
	fmt.Fprintf(w.progress, "sweep: %s throughput ...\n", formatSize(size))
	if err := w.throughput(ctx, size, &row); err != nil {
		return row, fmt.Errorf("throughput: %w", err)
	}
	fmt.Fprintf(w.progress, "sweep: %s ping-pong ...\n", formatSize(size))
	if err := w.latency(ctx, size, &row); err != nil {
		return row, fmt.Errorf("ping-pong: %w", err)
	}
	return row, nil
}

// sweepWindow returns the send window for a size: about 8 MiB in flight,
// between 16 and 128 messages.
func sweepWindow(size int) int {
	return max(16, min(128, (8*mib)/size))
}

// throughput streams messages from a client to a listener until the budget
// is spent and counts what the listener received, timed from the first send
// to the last receive.
func (w *sweeper) throughput(ctx context.Context, size int, row *sweepRow) error {
	window := sweepWindow(size)
	sk := newSink(nil, 0)
	l, err := endpoint.Listen(w.mgr, "127.0.0.1:0", sk.listenConfig(size, 2*window, w.poll.config()))
	if err != nil {
		return err
	}
	defer l.Close()
	s := newSender(size, nil)
	closeEndpoint, err := s.dial(ctx, w.mgr, l.Addr(), window, w.poll.config(), w.zeroCopy)
	if err != nil {
		return err
	}
	defer closeEndpoint()
	start := time.Now()
	sent, err := s.run(ctx, w.budget.messages(size), start.Add(w.budget.throughput))
	if err == nil {
		err = s.drain(ctx)
	}
	if err != nil {
		return err
	}
	if err := awaitDelivery(ctx, sk, sent, 5*time.Second); err != nil {
		return err
	}
	row.Messages, row.Bytes = sk.messages.Load(), sk.bytes.Load()
	elapsed := sk.lastAt().Sub(start)
	row.Seconds = elapsed.Seconds()
	row.MBPerS, row.MsgsPerS = rates(row.Messages, row.Bytes, elapsed)
	return nil
}

// awaitDelivery waits (polling every millisecond) until the sink has
// received n messages.
func awaitDelivery(ctx context.Context, sk *sink, n uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for sk.messages.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d messages arrived within %v", sk.messages.Load(), n, limit)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
