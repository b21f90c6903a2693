package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

const (
	publishSynopsis   = "netio-perf publish [--provider P] [--listen IP:PORT] [--tags N] [--tag-base T] [--first-seq Q] [--size S] [--count N] [--duration D] [--rate R] [--policy block|drop] [--immediate|--shared] [--buf-size B] [--bufs N] [--flush-interval D] [--subscribers K] [--until-unsubscribed] [--verify] [--log] [--json] [--timeout D]"
	subscribeSynopsis = "netio-perf subscribe [--provider P] --connect IP:PORT --tags LIST [--count N] [--policy block|drop] [--buf-size B] [--bufs N] [--verify] [--log] [--json] [--timeout D] [--local IP] [--stall-after N [--stall D]] [--churn N]"
	// modePubsub is the sweep mode that publishes to 1 and 4 subscribers.
	modePubsub = "pubsub"
	// pubsubBufSize and pubsubBufs are the default buffers of a publisher's
	// data connections and of a subscriber's: 8 of 64 KiB, about the
	// 256 KiB in flight --mode coalesce found best.
	pubsubBufSize = 64 * kib
	pubsubBufs    = 8
	// pubsubLinger bounds the publisher's wait, after its last message, for
	// its subscribers to take everything and leave.
	pubsubLinger = 10 * time.Second
	// retrySpins and retrySleep are how the publisher retries NoResources
	// (Block): yield for a few tries, then sleep, so that on a machine with
	// few cores a publisher waiting for its subscribers does not take the
	// CPU they need to catch up.
	retrySpins = 16
	retrySleep = 20 * time.Microsecond
)

// defaultPubsubSubs is what --mode pubsub measures: one subscriber, and
// four.
var defaultPubsubSubs = []int{1, 4}

// defaultPubsubSizes is what --mode pubsub measures without --sizes.
var defaultPubsubSizes = []int{64, kib, 4 * kib}

// publishOptions are the publisher's flags.
type publishOptions struct {
	commonFlags
	listen      hostPort
	tags        int
	tagBase     uint64
	firstSeq    uint64
	size        int
	count       uint64
	duration    time.Duration
	rate        float64
	policy      pubsub.Policy
	immediate   bool
	shared      bool
	bufSize     int
	bufs        int
	flush       time.Duration
	subscribers int
	verify      bool
	log         bool
	timeout     time.Duration
	churn       *publishChurn
}

// parsePolicy parses --policy.
func parsePolicyFlag(s string) (pubsub.Policy, error) {
	switch s {
	case "block":
		return pubsub.Block, nil
	case "drop":
		return pubsub.Drop, nil
	case "":
		return pubsub.DefaultPolicy, nil
	}
	return 0, fmt.Errorf("--policy %q: want block or drop", s)
}

// parsePublishFlags parses the publisher's command line.
func parsePublishFlags(args []string, stderr io.Writer) (publishOptions, error) {
	o := publishOptions{tags: 1, size: 64, count: 1000000, bufSize: pubsubBufSize, bufs: pubsubBufs, subscribers: 1, churn: &publishChurn{}}
	fs := newCmdLine("publish", publishSynopsis, stderr)
	o.register(fs.FlagSet)
	listen := fs.String("listen", "127.0.0.1:0", "subscription port, IP:PORT with an IP literal or localhost, not a host name (port 0 picks a free port); data connections go out from this IP")
	fs.IntVar(&o.tags, "tags", o.tags, "tags served: T..T+N-1 (T is --tag-base); message k goes to tag T+k%N")
	fs.Uint64Var(&o.tagBase, "tag-base", 0, "first tag served (so that publishers can serve distinct tags)")
	fs.Uint64Var(&o.firstSeq, "first-seq", 0, "sequence number of every tag's first message: a restarted publisher continues its numbering, and its subscribers count what they missed")
	fs.Var(sizeFlag{&o.size}, "size", "message size in bytes")
	fs.Uint64Var(&o.count, "count", o.count, "messages to publish over all tags (0: until --duration)")
	fs.DurationVar(&o.duration, "duration", 0, "publish for this long at most (0: until --count)")
	fs.Float64Var(&o.rate, "rate", 0, "messages per second over all tags (0: as fast as the subscribers take them)")
	policy := fs.String("policy", "block", "for subscribers that ask for none: block (Publish refuses with NoResources while a subscriber has no room and the tool retries, so nothing is lost) or drop (a slow subscriber's copies are dropped and counted)")
	fs.BoolVar(&o.immediate, "immediate", false, "post every message at once instead of coalescing")
	fs.BoolVar(&o.shared, "shared", false, "coalesce each message once into a buffer shared by the subscribers of its tags (pubsub.Shared)")
	fs.Var(sizeFlag{&o.bufSize}, "buf-size", "send buffer size per subscriber (the subscribers' --buf-size must be at least this)")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "send buffers per subscriber")
	fs.DurationVar(&o.flush, "flush-interval", 0, "longest wait of a message in a partly filled buffer (default 1ms)")
	fs.IntVar(&o.subscribers, "subscribers", o.subscribers, "wait for this many subscribers before publishing")
	fs.BoolVar(&o.verify, "verify", false, "message k of a tag carries k and the tag, then bytes (k+i)%256, for subscribe --verify")
	fs.BoolVar(&o.log, "log", false, "log connection and subscription events to stderr")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long (0: none)")
	o.churn.registerChurn(fs)
	if err := fs.parse(args); err != nil {
		return o, err
	}
	var err error
	if o.listen, err = parseHostPort(*listen, true); err != nil {
		return o, fs.fail(fmt.Errorf("--listen: %w", err))
	}
	if o.policy, err = parsePolicyFlag(*policy); err != nil {
		return o, fs.fail(err)
	}
	switch {
	case o.tags < 1 || o.tags > maxTagList:
		return o, fs.fail(fmt.Errorf("--tags must be in 1..%d", maxTagList))
	case o.tagBase+uint64(o.tags)-1 < o.tagBase || o.tagBase+uint64(o.tags)-1 == pubsub.ControlTag:
		return o, fs.fail(errors.New("--tag-base + --tags reaches the reserved tag 2^64-1"))
	case o.count == 0 && o.duration == 0:
		return o, fs.fail(errors.New("--count 0 needs --duration"))
	case o.duration < 0 || o.rate < 0 || o.flush < 0 || o.timeout < 0:
		return o, fs.fail(errors.New("--duration, --rate, --flush-interval and --timeout must not be negative"))
	case o.immediate && o.shared:
		return o, fs.fail(errors.New("--immediate and --shared exclude each other"))
	case o.bufs < 1 || o.subscribers < 0:
		return o, fs.fail(errors.New("--bufs must be at least 1, --subscribers not negative"))
	case o.verify && o.size < testpattern.HeaderSize:
		return o, fs.fail(fmt.Errorf("--verify needs --size of at least %d", testpattern.HeaderSize))
	}
	return o, nil
}

// pubReport is the publisher's JSON line.
type pubReport struct {
	Role            string          `json:"role"`
	Provider        string          `json:"provider"`
	Tags            int             `json:"tags"`
	Size            int             `json:"size"`
	Policy          string          `json:"policy"`
	Mode            string          `json:"mode"`
	Published       uint64          `json:"published"`
	NoSubscriptions uint64          `json:"no_subscriptions"`
	Retries         uint64          `json:"retries"` // Publish calls answered NoResources (Block), retried
	Seconds         float64         `json:"seconds"`
	MsgsPerS        float64         `json:"msgs_per_s"`
	MBPerS          float64         `json:"mb_per_s"`
	CPUSeconds      float64         `json:"cpu_seconds"`  // this process, user+sys, while publishing
	CtxSwitches     int64           `json:"ctx_switches"` // this process's threads switched off a CPU (voluntarily or not), while publishing
	Subscribers     []pubSubscriber `json:"subscribers"`  // every subscriber served during the run, those that left included
	// Dropped counts the copies dropped over all tags and subscribers,
	// those that left before the end included.
	Dropped uint64 `json:"dropped"`
	// Baseline (--until-unsubscribed) is where the publisher stood idle
	// and after its subscribers left.
	Baseline *pubBaseline `json:"baseline,omitempty"`
}

// pubSubscriber is one subscriber as the publisher saw it.
type pubSubscriber struct {
	Peer      string `json:"peer"`
	Policy    string `json:"policy"`
	Tags      int    `json:"tags"`
	Delivered uint64 `json:"delivered"`
	Dropped   uint64 `json:"dropped"`
}

// verifyPattern is the --verify pattern of publish and subscribe: message
// seq of a tag is the test pattern's message seq of stream tag, with the
// header that names both, so a message delivered under the wrong tag or
// sequence number is caught, not only a corrupted byte.
func verifyPattern(maxLen int) *testpattern.Pattern {
	return testpattern.New(maxLen, testpattern.WithHeader())
}

// runPublish is the publish mode: it serves --tags, waits for
// --subscribers, publishes, waits for the subscribers to leave (at most
// pubsubLinger) and reports.
func runPublish(ctx context.Context, o publishOptions, stdout, stderr io.Writer) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("timeout after %v", o.timeout))
		defer cancel()
	}
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: o.listen.IP, Logger: o.roleLogger(stderr, "publish", o.log)})
	if err != nil {
		return err
	}
	defer mgr.Close()
	tags := make([]uint64, o.tags)
	for i := range tags {
		tags[i] = o.tagBase + uint64(i)
	}
	mode := pubsub.Buffered
	if o.immediate {
		mode = pubsub.Immediate
	}
	if o.shared {
		mode = pubsub.Shared
	}
	cfg := pubsub.PublisherConfig{Tags: tags, Mode: mode, Policy: o.policy, FlushInterval: o.flush,
		Send:          netio.BufferedSendParams{BufferSize: o.bufSize, BufferCount: o.bufs},
		FirstSequence: func(uint64) uint64 { return o.firstSeq }}
	cfg.PollerConfig = o.poll.config()
	cfg.Logger = o.roleLogger(stderr, "publish", o.log)
	o.churn.hook(&cfg)
	var seen seenSubscribers
	seen.hook(&cfg)
	var ready readyPeers
	ready.hook(&cfg)
	p, err := pubsub.NewPublisher(mgr, o.listen.String(), cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	seen.watch(p)
	o.churn.idle = takeBaseline(mgr)
	fmt.Fprintf(stdout, "LISTENING %s\n", p.Addr())
	fmt.Fprintf(stderr, "publishing %d tags on %s; waiting for %d subscribers\n", o.tags, p.Addr(), o.subscribers)
	for ready.count(p) < o.subscribers {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
	seen.note(p.Subscribers()) // with all their tags
	r := pubReport{Role: "publish", Provider: o.provider, Tags: o.tags, Size: o.size, Policy: o.policy.String(), Mode: "buffered"}
	if o.immediate {
		r.Mode = "immediate"
	}
	if o.shared {
		r.Mode = "shared"
	}
	start, cpu0, sw0 := time.Now(), cpuTime(), ctxSwitches()
	err = publishLoop(ctx, p, o, &r)
	p.Flush() // Shared mode counts a copy delivered when its buffer is posted
	elapsed := time.Since(start)
	r.CPUSeconds, r.CtxSwitches = (cpuTime() - cpu0).Seconds(), ctxSwitches()-sw0
	// A copy waiting for a Block subscriber counts when it is sent.
	for linger := time.Now().Add(pubsubLinger); anyPending(p) && time.Now().Before(linger) && ctx.Err() == nil; {
		time.Sleep(time.Millisecond)
	}
	seen.note(p.Subscribers())
	if err == nil { // let the subscribers take everything and leave
		linger := time.Now().Add(pubsubLinger)
		for p.Stats().Subscribers > 0 && time.Now().Before(linger) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	seen.note(p.Subscribers()) // those still there
	r.Subscribers = seen.list()
	for _, tag := range tags {
		st, _ := p.TagStats(tag)
		r.Dropped += st.Dropped
	}
	if o.churn.untilUnsubscribed {
		r.Baseline = o.churn.settle(p, mgr)
	}
	closeErr := p.Close()
	r.Seconds = elapsed.Seconds()
	r.MBPerS, r.MsgsPerS = rates(r.Published, r.Published*uint64(o.size), elapsed)
	if o.json {
		if perr := printJSON(stdout, r); perr != nil {
			return perr
		}
	} else {
		fmt.Fprintf(stdout, "publish (%s): %d messages of %d B on %d tags in %.3f s: %.4f Mmsg/s, %.1f MB/s, %d retries (NoResources), %d without subscriber\n",
			o.provider, r.Published, o.size, o.tags, r.Seconds, r.MsgsPerS/1e6, r.MBPerS, r.Retries, r.NoSubscriptions)
		for _, s := range r.Subscribers {
			fmt.Fprintf(stdout, "  subscriber %s (%s, %d tags): %d delivered, %d dropped\n", s.Peer, s.Policy, s.Tags, s.Delivered, s.Dropped)
		}
	}
	return firstError(err, closeErr)
}

// anyPending reports whether a message waits for a Block subscriber.
func anyPending(p *pubsub.Publisher) bool {
	for _, s := range p.Subscribers() {
		if s.Pending {
			return true
		}
	}
	return false
}

// publishLoop publishes --count messages (or for --duration), round robin
// over the tags, at --rate.
func publishLoop(ctx context.Context, p *pubsub.Publisher, o publishOptions, r *pubReport) error {
	buf := make([]byte, o.size)
	pat := verifyPattern(o.size)
	seqs := make([]uint64, o.tags)
	for i := range seqs {
		seqs[i] = o.firstSeq
	}
	start := time.Now()
	var end time.Time
	if o.duration > 0 {
		end = start.Add(o.duration)
	}
	for k := uint64(0); o.count == 0 || k < o.count; k++ {
		if k%deadlineStride == 0 {
			if err := ctx.Err(); err != nil {
				return context.Cause(ctx)
			}
			if !end.IsZero() && time.Now().After(end) || o.churn.everyoneLeft(p) {
				return nil
			}
		}
		if o.rate > 0 { // pace: message k is due k/rate after the start
			if due := start.Add(time.Duration(float64(k) / o.rate * 1e9)); time.Until(due) > 0 {
				time.Sleep(time.Until(due))
			}
		}
		i := k % uint64(o.tags)
		tag := o.tagBase + i
		if o.verify {
			pat.Fill(buf, tag, seqs[i])
		}
		for spins := 0; ; spins++ {
			st := p.Publish(tag, buf)
			if st == pubsub.NoResources {
				r.Retries++
				if spins%1024 == 1023 && ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if spins < retrySpins {
					runtime.Gosched()
				} else { // the subscribers are behind: leave them the CPU
					time.Sleep(retrySleep)
				}
				continue
			}
			switch st {
			case pubsub.OK, pubsub.PartiallyFailed, pubsub.Failed:
			case pubsub.NoSubscriptions:
				r.NoSubscriptions++
			default:
				return fmt.Errorf("publish tag %d: %v", tag, st)
			}
			break
		}
		seqs[i]++
		r.Published++
	}
	return nil
}

// pubsubRows measures --mode pubsub: for each subscriber count and size,
// one publisher publishing one tag as fast as its Block subscribers take
// it, each subscriber with its own poller, all in this process.
func (w *sweeper) pubsubRows(ctx context.Context, sizes, subs []int) ([]sweepRow, error) {
	var rows []sweepRow
	for _, n := range subs {
		for _, size := range sizes {
			fmt.Fprintf(w.progress, "sweep: pubsub %d subscribers, %s ...\n", n, formatSize(size))
			row, err := w.pubsubRun(ctx, n, size)
			if err != nil {
				return nil, fmt.Errorf("pubsub %d subscribers, %s: %w", n, formatSize(size), err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// pubsubRun measures one row of --mode pubsub: messages delivered to all
// subscribers per second, from the first Publish to the last delivery.
func (w *sweeper) pubsubRun(ctx context.Context, n, size int) (sweepRow, error) {
	row := sweepRow{Size: size, Connections: n}
	bufSize := max(pubsubBufSize, 2*size+1024)
	pcfg := pubsub.PublisherConfig{Tags: []uint64{1}, Send: netio.BufferedSendParams{BufferSize: bufSize, BufferCount: pubsubBufs}}
	pcfg.PollerConfig = w.poll.config()
	p, err := pubsub.NewPublisher(w.mgr, "127.0.0.1:0", pcfg)
	if err != nil {
		return row, err
	}
	defer p.Close()
	var got, bytes atomic.Uint64
	var lastAt atomic.Int64
	for range n {
		scfg := pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()),
			Receive: netio.ReceiveParams{BufferSize: bufSize, BufferCount: 4 * pubsubBufs},
			OnMessage: func(m pubsub.Message) {
				got.Add(1)
				bytes.Add(uint64(len(m.Data)))
				lastAt.Store(time.Now().UnixNano())
			}}
		scfg.PollerConfig = w.poll.config()
		s, err := pubsub.NewSubscriber(w.mgr, scfg)
		if err != nil {
			return row, err
		}
		defer s.Close()
		if err := s.Subscribe(ctx, 1); err != nil {
			return row, err
		}
	}
	buf := make([]byte, size)
	limit := w.budget.messages(size)
	m := startMeter()
	end := m.start.Add(w.budget.throughput)
	var published uint64
	for published < limit {
		if published%deadlineStride == 0 && (time.Now().After(end) || ctx.Err() != nil) {
			break
		}
		switch st := p.Publish(1, buf); st {
		case pubsub.OK:
			published++
		case pubsub.NoResources:
			runtime.Gosched()
		default:
			return row, fmt.Errorf("publish: %v", st)
		}
	}
	want := published * uint64(n)
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < want {
		if time.Now().After(deadline) {
			return row, fmt.Errorf("delivered %d of %d", got.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
	cpu := cpuTime() - m.cpu0
	elapsed := time.Unix(0, lastAt.Load()).Sub(m.start)
	row.Messages, row.Bytes, row.Sent = got.Load(), bytes.Load(), published
	row.Window, row.RxBufs, row.BufSize = pubsubBufs, 4*pubsubBufs, bufSize
	row.Seconds = elapsed.Seconds()
	row.MBPerS, row.MsgsPerS = rates(row.Messages, row.Bytes, elapsed)
	row.setCPU(cpu)
	return row, nil
}

// printPubsubTable writes the rows of --mode pubsub.
func printPubsubTable(w io.Writer, provider string, rows []sweepRow) error {
	fmt.Fprintf(w, "netio-perf publish/subscribe, provider %s: one publisher, one tag, N subscribers (Block) in this process; messages counted at the subscribers (MB = 10^6 bytes; CPU = user+sys of this process, GB = 10^9 bytes)\n", provider)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subs\tsize\tpublished\tdelivered\tMmsg/s total\tMmsg/s per sub\tMB/s total\tCPU ns/msg\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.3f\t%.3f\t%.1f\t%.1f\t\n", r.Connections, formatSize(r.Size), r.Sent, r.Messages,
			r.MsgsPerS/1e6, r.MsgsPerS/1e6/float64(max(1, r.Connections)), r.MBPerS, perMessage(r.CPUSeconds*1e9, r.Messages))
	}
	return tw.Flush()
}
