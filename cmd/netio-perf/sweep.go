package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

const sweepSynopsis = "netio-perf [--endpoint msg|rdm] [--provider P] [--mode send|rma-read|rma-write|scale|coalesce|pubsub] [--sizes LIST] [--conns LIST] [--duration D] [--window N] [--rx-bufs N] [--buf-size B] [--flush-interval D] [--quick] [--zero-copy] [--verify] [--json] [--plot FILE.svg|.png]"

// Default sizes and connection counts of the sweep and of --mode scale.
var (
	defaultSweepSizes = []int{64, kib, 4 * kib, 64 * kib, mib}
	defaultScaleSizes = []int{4 * kib}
	defaultScaleConns = []int{1, 4, 16, 64}
)

// sweepOptions are the sweep's flags.
type sweepOptions struct {
	commonFlags
	endpointFlags
	sizes    []int
	conns    []int // --mode scale: connections into the one receiver
	quick    bool
	zeroCopy bool
	mode     string
	duration time.Duration // 0: the budget's
	window   int           // 0: by size (sweepWindow, scaleWindow)
	rxBufs   int           // 0: twice the window
	coalesce coalesceFlags // --mode coalesce: the coalescing buffers
	verify   bool          // --mode coalesce: sequence tags and pattern payloads, checked
	plot     string        // --plot: picture file (plot.go); "" for none
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

// withDuration returns the budget with both time bounds set to d, or as it
// is for d == 0.
func (b budget) withDuration(d time.Duration) budget {
	if d > 0 {
		b.throughput, b.pingPong = d, d
	}
	return b
}

// parseSweepFlags parses the sweep's command line.
func parseSweepFlags(args []string, stderr io.Writer) (sweepOptions, error) {
	o := sweepOptions{}
	fs := newCmdLine("sweep", sweepSynopsis, stderr)
	o.register(fs.FlagSet)
	sizes := fs.String("sizes", "", "comma-separated message sizes (default 64,1K,4K,64K,1M; 4K with --mode scale)")
	conns := fs.String("conns", "", "--mode scale: comma-separated connection counts into one receiver (default 1,4,16,64); --mode pubsub: subscriber counts (default 1,4)")
	fs.BoolVar(&o.quick, "quick", false, "short budgets (≈0.3 s per size), for tests")
	fs.BoolVar(&o.zeroCopy, "zero-copy", false, "throughput part: send from the sender's own memory instead of copying into send buffers")
	fs.StringVar(&o.mode, "mode", modeSend, "what to measure: send (messages), rma-read (Pull) or rma-write (Push) of an exposed region, scale (send throughput of --conns connections into one receiver), coalesce (small messages through SendMessage, counted at the receiver's OnMessage), pubsub (one publisher to each --conns count of subscribers, default 1,4)")
	fs.DurationVar(&o.duration, "duration", 0, "length of each throughput part and each ping-pong (default 2s and 1s; 200ms and 100ms with --quick)")
	fs.IntVar(&o.window, "window", 0, "send buffers in flight per connection (default: by size, about 8 MiB in flight, 16..128; fewer per connection with --mode scale; with --mode coalesce coalescing buffers, about 256 KiB, 4..128)")
	fs.IntVar(&o.rxBufs, "rx-bufs", 0, "receive buffers posted per connection (default: twice the window)")
	o.coalesce.register(fs, "--mode coalesce")
	fs.BoolVar(&o.verify, "verify", false, "--mode coalesce: message k has tag k and byte i of its payload is (k+i)%251; the receiver checks both")
	o.registerEndpoint(fs.FlagSet)
	o.registerPlot(fs)
	if err := fs.parse(args); err != nil {
		return o, err
	}
	if _, err := o.endpointFlags.check(fs, &o.commonFlags, "", "", true); err != nil {
		return o, fs.fail(err)
	}
	if o.rdm() && (o.mode != modeSend || o.zeroCopy) {
		return o, fs.fail(errors.New("--endpoint rdm measures --mode send, without --zero-copy"))
	}
	if err := o.validate(*sizes, *conns); err != nil {
		return o, fs.fail(err)
	}
	if err := o.checkPlot(); err != nil {
		return o, fs.fail(err)
	}
	if err := o.coalesce.check(fs, o.mode == modeCoalesce, "--mode coalesce", slices.Max(o.sizes)); err != nil {
		return o, fs.fail(err)
	}
	return o, nil
}

// validate checks the options and fills sizes and conns from their flags,
// or with the mode's defaults when a flag is empty.
func (o *sweepOptions) validate(sizes, conns string) error {
	switch o.mode {
	case modeSend, modeRMARead, modeRMAWrite, modeScale, modeCoalesce, modePubsub:
	default:
		return fmt.Errorf("--mode %q: want send, rma-read, rma-write, scale, coalesce or pubsub", o.mode)
	}
	if o.duration < 0 || o.window < 0 || o.rxBufs < 0 {
		return errors.New("--duration, --window and --rx-bufs must not be negative")
	}
	if o.rxBufs > maxPostedReceives || o.window > maxPostedReceives {
		return fmt.Errorf("--window and --rx-bufs: at most %d (the providers' queue depth)", maxPostedReceives)
	}
	if conns != "" && o.mode != modeScale && o.mode != modePubsub {
		return errors.New("--conns needs --mode scale or pubsub")
	}
	if o.zeroCopy && (o.mode == modeScale || o.mode == modeCoalesce || o.mode == modePubsub) {
		return fmt.Errorf("--zero-copy does not apply to --mode %s", o.mode)
	}
	if o.verify && o.mode != modeCoalesce {
		return errors.New("--verify needs --mode coalesce")
	}
	o.sizes, o.conns = defaultSweepSizes, defaultScaleConns
	switch o.mode {
	case modeScale:
		o.sizes = defaultScaleSizes
	case modeCoalesce:
		o.sizes = defaultCoalesceSizes
	case modePubsub:
		o.sizes, o.conns = defaultPubsubSizes, defaultPubsubSubs
	}
	var err error
	if sizes != "" {
		if o.sizes, err = parseSizes(sizes); err != nil {
			return fmt.Errorf("--sizes: %w", err)
		}
	}
	if conns != "" {
		if o.conns, err = parseCounts(conns, maxScaleConns); err != nil {
			return fmt.Errorf("--conns: %w", err)
		}
	}
	return nil
}

// runSweep runs the loopback sweep in this process, a server and a client
// in one domain, and prints the table (or JSON).
func runSweep(ctx context.Context, o sweepOptions, stdout, stderr io.Writer) error {
	b := fullBudget
	if o.quick {
		b = quickBudget
	}
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (*domain.Manager, error) { return openSweepDomain(o, stderr) })
	if err != nil {
		return err
	}
	defer done()
	w := sweeper{mgr: mgr, rdm: o.rdm(), budget: b.withDuration(o.duration), poll: o.poll, zeroCopy: o.zeroCopy,
		mode: o.mode, window: o.window, rxBufs: o.rxBufs, coalesce: o.coalesce, verify: o.verify, progress: stderr}
	var rows []sweepRow
	switch o.mode {
	case modeScale:
		rows, err = w.scaleRows(ctx, o.sizes, o.conns)
	case modePubsub:
		rows, err = w.pubsubRows(ctx, o.sizes, o.conns)
	default:
		rows, err = w.sizeRows(ctx, o.sizes)
	}
	if err != nil {
		return err
	}
	if o.plot != "" {
		if err := writeSweepPlot(o, rows, stderr); err != nil {
			return err
		}
	}
	if o.json {
		return printJSON(stdout, sweepReport{Role: "sweep", Provider: o.provider, Mode: o.mode, Rows: rows})
	}
	switch o.mode {
	case modeScale:
		return printScaleTable(stdout, o.provider, rows)
	case modeCoalesce:
		return printCoalesceTable(stdout, o.provider, rows)
	case modePubsub:
		return printPubsubTable(stdout, o.provider, rows)
	}
	return printTable(stdout, o.provider, o.mode, rows)
}

// sweeper runs the parts of the sweep in one domain.
type sweeper struct {
	mgr      *domain.Manager
	rdm      bool // --endpoint rdm: connectionless endpoints in mgr
	budget   budget
	poll     pollMode
	zeroCopy bool
	mode     string
	window   int           // send buffers per connection; 0: by size
	rxBufs   int           // receive buffers per connection; 0: twice the window
	coalesce coalesceFlags // --mode coalesce: the coalescing buffers
	verify   bool          // --mode coalesce: check tags and payloads
	progress io.Writer     // progress lines
}

// sizeRows measures every size, one row each.
func (w *sweeper) sizeRows(ctx context.Context, sizes []int) ([]sweepRow, error) {
	rows := make([]sweepRow, 0, len(sizes))
	for _, size := range sizes {
		row, err := w.measure(ctx, size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", formatSize(size), err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// measure measures throughput, then ping-pong latency, for one size; or
// what the mode measures instead.
func (w *sweeper) measure(ctx context.Context, size int) (sweepRow, error) {
	if w.mode == modeCoalesce {
		return w.coalesced(ctx, size)
	}
	if w.mode != modeSend {
		return w.measureRMA(ctx, size, w.mode == modeRMAWrite)
	}
	row := sweepRow{Size: size}
	throughput, latency := w.throughput, w.latency
	if w.rdm {
		throughput, latency = w.throughputRDM, w.latencyRDM
	}
	fmt.Fprintf(w.progress, "sweep: %s throughput ...\n", formatSize(size))
	if err := throughput(ctx, size, &row); err != nil {
		return row, fmt.Errorf("throughput: %w", err)
	}
	fmt.Fprintf(w.progress, "sweep: %s ping-pong ...\n", formatSize(size))
	if err := latency(ctx, size, &row); err != nil {
		return row, fmt.Errorf("ping-pong: %w", err)
	}
	return row, nil
}

// sweepWindow returns the send window for a size: about 8 MiB in flight,
// between 16 and 128 messages.
func sweepWindow(size int) int {
	return max(16, min(128, (8*mib)/size))
}

// windows returns the send window and the receive buffers per connection:
// the flags when given, else window and twice the window.
func (w *sweeper) windows(window int) (send, receive int) {
	if w.window > 0 {
		window = w.window
	}
	receive = 2 * window
	if w.rxBufs > 0 {
		receive = w.rxBufs
	}
	return window, min(receive, maxPostedReceives)
}

// throughput streams messages from a client to a listener until the budget
// is spent and counts what the listener received, timed from the first send
// to the last receive. CPU time is the whole process's, both sides, over the
// same span.
func (w *sweeper) throughput(ctx context.Context, size int, row *sweepRow) error {
	window, rxBufs := w.windows(sweepWindow(size))
	sk := newSink(nil, 0)
	l, err := endpoint.Listen(w.mgr, "127.0.0.1:0", sk.listenConfig(size, rxBufs, w.poll.config()))
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
	return w.stream(ctx, s, sk, size, window, rxBufs, row)
}

// stream runs the throughput part's sender s into the sink sk until the
// budget is spent and fills row from what sk received, timed from the
// first send to the last receive.
func (w *sweeper) stream(ctx context.Context, s *sender, sk *sink, size, window, rxBufs int, row *sweepRow) error {
	m := startMeter()
	sent, err := s.run(ctx, w.budget.messages(size), m.start.Add(w.budget.throughput))
	if err == nil {
		err = s.drain(ctx)
	}
	if err != nil {
		return err
	}
	if err := awaitDelivery(ctx, sk, sent, 5*time.Second); err != nil {
		return err
	}
	row.Window, row.RxBufs = window, rxBufs
	m.stop(sk, row)
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
