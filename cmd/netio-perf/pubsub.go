package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

const (
	publishSynopsis   = "netio-perf publish [--provider P] [--listen IP:PORT] [--tags N] [--tag-base T] [--first-seq Q] [--size S] [--count N] [--duration D] [--rate R] [--policy block|drop] [--immediate] [--buf-size B] [--bufs N] [--flush-interval D] [--subscribers K] [--verify] [--log] [--json] [--timeout D]"
	subscribeSynopsis = "netio-perf subscribe [--provider P] --connect IP:PORT --tags LIST [--count N] [--policy block|drop] [--buf-size B] [--bufs N] [--verify] [--log] [--json] [--timeout D] [--local IP]"
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
	// verifyHeader is the part of a --verify message that names it: its
	// sequence number and tag.
	verifyHeader = 16
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
	bufSize     int
	bufs        int
	flush       time.Duration
	subscribers int
	verify      bool
	log         bool
	timeout     time.Duration
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
	o := publishOptions{tags: 1, size: 64, count: 1000000, bufSize: pubsubBufSize, bufs: pubsubBufs, subscribers: 1}
	fs := newCmdLine("publish", publishSynopsis, stderr)
	o.register(fs.FlagSet)
	listen := fs.String("listen", "127.0.0.1:0", "subscription port, IP:PORT (port 0 picks a free port); data connections go out from this IP")
	fs.IntVar(&o.tags, "tags", o.tags, "tags served: T..T+N-1 (T is --tag-base); message k goes to tag T+k%N")
	fs.Uint64Var(&o.tagBase, "tag-base", 0, "first tag served (so that publishers can serve distinct tags)")
	fs.Uint64Var(&o.firstSeq, "first-seq", 0, "sequence number of every tag's first message: a restarted publisher continues its numbering, and its subscribers count what they missed")
	fs.Var(sizeFlag{&o.size}, "size", "message size in bytes")
	fs.Uint64Var(&o.count, "count", o.count, "messages to publish over all tags (0: until --duration)")
	fs.DurationVar(&o.duration, "duration", 0, "publish for this long at most (0: until --count)")
	fs.Float64Var(&o.rate, "rate", 0, "messages per second over all tags (0: as fast as the subscribers take them)")
	policy := fs.String("policy", "block", "for subscribers that ask for none: block (Publish waits, nothing is lost) or drop (a slow subscriber's copies are dropped and counted)")
	fs.BoolVar(&o.immediate, "immediate", false, "post every message at once instead of coalescing")
	fs.Var(sizeFlag{&o.bufSize}, "buf-size", "send buffer size per subscriber (the subscribers' --buf-size must be at least this)")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "send buffers per subscriber")
	fs.DurationVar(&o.flush, "flush-interval", 0, "longest wait of a message in a partly filled buffer (default 1ms)")
	fs.IntVar(&o.subscribers, "subscribers", o.subscribers, "wait for this many subscribers before publishing")
	fs.BoolVar(&o.verify, "verify", false, "message k of a tag carries k and the tag, then bytes (k+i)%256, for subscribe --verify")
	fs.BoolVar(&o.log, "log", false, "log connection and subscription events to stderr")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long (0: none)")
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
	case o.tags < 1 || o.tags > pubsub.MaxTagsPerRequest:
		return o, fs.fail(fmt.Errorf("--tags must be in 1..%d", pubsub.MaxTagsPerRequest))
	case o.tagBase+uint64(o.tags)-1 < o.tagBase || o.tagBase+uint64(o.tags)-1 == pubsub.ControlTag:
		return o, fs.fail(errors.New("--tag-base + --tags reaches the reserved tag 2^64-1"))
	case o.count == 0 && o.duration == 0:
		return o, fs.fail(errors.New("--count 0 needs --duration"))
	case o.duration < 0 || o.rate < 0 || o.flush < 0 || o.timeout < 0:
		return o, fs.fail(errors.New("--duration, --rate, --flush-interval and --timeout must not be negative"))
	case o.bufs < 1 || o.subscribers < 0:
		return o, fs.fail(errors.New("--bufs must be at least 1, --subscribers not negative"))
	case o.verify && o.size < verifyHeader:
		return o, fs.fail(fmt.Errorf("--verify needs --size of at least %d", verifyHeader))
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
	Subscribers     []pubSubscriber `json:"subscribers"`
}

// pubSubscriber is one subscriber as the publisher saw it.
type pubSubscriber struct {
	Peer      string `json:"peer"`
	Policy    string `json:"policy"`
	Tags      int    `json:"tags"`
	Delivered uint64 `json:"delivered"`
	Dropped   uint64 `json:"dropped"`
}

// fillVerify writes message seq of tag for --verify.
func fillVerify(b []byte, tag, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	binary.LittleEndian.PutUint64(b[8:], tag)
	for i := verifyHeader; i < len(b); i++ {
		b[i] = byte(seq + uint64(i))
	}
}

// checkVerify checks a --verify message.
func checkVerify(m pubsub.Message) bool {
	if len(m.Data) < verifyHeader || binary.LittleEndian.Uint64(m.Data) != m.Seq || binary.LittleEndian.Uint64(m.Data[8:]) != m.Tag {
		return false
	}
	for i := verifyHeader; i < len(m.Data); i++ {
		if m.Data[i] != byte(m.Seq+uint64(i)) {
			return false
		}
	}
	return true
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
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: o.listen.IP})
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
	cfg := pubsub.PublisherConfig{Tags: tags, Mode: mode, Policy: o.policy, FlushInterval: o.flush,
		Send:          netio.BufferedSendParams{BufferSize: o.bufSize, BufferCount: o.bufs},
		FirstSequence: func(uint64) uint64 { return o.firstSeq }}
	cfg.PollerConfig = o.poll.config()
	if o.log {
		cfg.Logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).With().Timestamp().Str("role", "publish").Logger()
	}
	p, err := pubsub.NewPublisher(mgr, o.listen.String(), cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(stdout, "LISTENING %s\n", p.Addr())
	fmt.Fprintf(stderr, "publishing %d tags on %s; waiting for %d subscribers\n", o.tags, p.Addr(), o.subscribers)
	for subscribedPeers(p) < o.subscribers {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
	r := pubReport{Role: "publish", Provider: o.provider, Tags: o.tags, Size: o.size, Policy: o.policy.String(), Mode: "buffered"}
	if o.immediate {
		r.Mode = "immediate"
	}
	start := time.Now()
	err = publishLoop(ctx, p, o, &r)
	elapsed := time.Since(start)
	for _, s := range p.Subscribers() {
		r.Subscribers = append(r.Subscribers, pubSubscriber{Peer: s.Peer, Policy: s.Policy.String(), Tags: len(s.Tags),
			Delivered: s.Delivered, Dropped: s.Dropped})
	}
	if err == nil { // let the subscribers take everything and leave
		linger := time.Now().Add(pubsubLinger)
		for p.Stats().Subscribers > 0 && time.Now().Before(linger) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
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

// subscribedPeers counts the subscribers that subscribed to a tag: past
// hello is not enough, their subscribe request may not have come yet.
func subscribedPeers(p *pubsub.Publisher) int {
	n := 0
	for _, s := range p.Subscribers() {
		if len(s.Tags) > 0 {
			n++
		}
	}
	return n
}

// publishLoop publishes --count messages (or for --duration), round robin
// over the tags, at --rate.
func publishLoop(ctx context.Context, p *pubsub.Publisher, o publishOptions, r *pubReport) error {
	buf := make([]byte, o.size)
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
			if !end.IsZero() && time.Now().After(end) {
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
			fillVerify(buf, tag, seqs[i])
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

// subscribeOptions are the subscriber's flags.
type subscribeOptions struct {
	commonFlags
	connect hostPort
	local   string
	tags    []uint64
	count   uint64
	policy  pubsub.Policy
	bufSize int
	bufs    int
	verify  bool
	log     bool
	timeout time.Duration
}

// parseTagList parses "1,2,5-9".
func parseTagList(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad tag %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("bad tag range %q", part)
			}
		}
		if b-a >= pubsub.MaxTagsPerRequest || len(out)+int(b-a) >= pubsub.MaxTagsPerRequest {
			return nil, fmt.Errorf("more than %d tags", pubsub.MaxTagsPerRequest)
		}
		for t := a; ; t++ {
			if t != pubsub.ControlTag {
				out = append(out, t)
			}
			if t == b {
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseSubscribeFlags parses the subscriber's command line.
func parseSubscribeFlags(args []string, stderr io.Writer) (subscribeOptions, error) {
	o := subscribeOptions{bufSize: pubsubBufSize, bufs: 4 * pubsubBufs}
	fs := newCmdLine("subscribe", subscribeSynopsis, stderr)
	o.register(fs.FlagSet)
	connect := fs.String("connect", "", "the publisher's subscription port, IP:PORT (required)")
	tags := fs.String("tags", "", "tags to subscribe: a list of numbers and ranges, e.g. 0,3,10-19 (required)")
	fs.StringVar(&o.local, "local", "", "local IP address for the data listener (default: the address routed to the publisher)")
	fs.Uint64Var(&o.count, "count", 0, "exit once this many messages were received or reported missing, over all tags (0: until SIGINT/SIGTERM)")
	policy := fs.String("policy", "", "ask the publisher for block or drop (default: the publisher's)")
	fs.Var(sizeFlag{&o.bufSize}, "buf-size", "receive buffer size (at least the publisher's --buf-size)")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "receive buffers posted")
	fs.BoolVar(&o.verify, "verify", false, "check every message's number, tag and bytes (publish --verify)")
	fs.BoolVar(&o.log, "log", false, "log connection and subscription events to stderr")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long (0: none; without --count the default is none)")
	if err := fs.parse(args); err != nil {
		return o, err
	}
	var err error
	if *connect == "" || *tags == "" {
		return o, fs.fail(errors.New("--connect and --tags are required"))
	}
	if o.connect, err = parseHostPort(*connect, false); err != nil {
		return o, fs.fail(fmt.Errorf("--connect: %w", err))
	}
	if o.tags, err = parseTagList(*tags); err != nil {
		return o, fs.fail(fmt.Errorf("--tags: %w", err))
	}
	if o.policy, err = parsePolicyFlag(*policy); err != nil {
		return o, fs.fail(err)
	}
	if o.local != "" && net.ParseIP(o.local) == nil {
		return o, fs.fail(fmt.Errorf("--local: %q is not an IP address", o.local))
	}
	if o.bufs < 1 || o.timeout < 0 {
		return o, fs.fail(errors.New("--bufs must be at least 1, --timeout not negative"))
	}
	if o.count == 0 && !fs.isSet("timeout") {
		o.timeout = 0
	}
	return o, nil
}

// subReport is the subscriber's JSON line.
type subReport struct {
	Role         string  `json:"role"`
	Provider     string  `json:"provider"`
	Publisher    string  `json:"publisher"`
	Tags         int     `json:"tags"`
	Messages     uint64  `json:"messages"` // delivered
	Bytes        uint64  `json:"bytes"`
	Gaps         uint64  `json:"gaps"`
	Missed       uint64  `json:"missed"`
	Resets       uint64  `json:"resets"`
	Seconds      float64 `json:"seconds"` // first message to last
	MsgsPerS     float64 `json:"msgs_per_s"`
	MBPerS       float64 `json:"mb_per_s"`
	Verify       bool    `json:"verify"`
	VerifyErrors uint64  `json:"verify_errors"`
}

// runSubscribe is the subscribe mode: it subscribes, receives until
// --count messages were received or reported missing (or a signal), and
// reports.
func runSubscribe(ctx context.Context, o subscribeOptions, stdout, stderr io.Writer) error {
	errTimedOut := fmt.Errorf("timeout after %v", o.timeout)
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.timeout, errTimedOut)
		defer cancel()
	}
	local := o.local
	if local == "" {
		var err error
		if local, err = localFor(o.connect); err != nil {
			return err
		}
	}
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: local})
	if err != nil {
		return err
	}
	defer mgr.Close()
	var received, missed, verifyErrors atomic.Uint64
	var first, last atomic.Int64
	reached := make(chan struct{})
	var reachedOnce atomic.Bool
	check := func() {
		if o.count > 0 && received.Load()+missed.Load() >= o.count && reachedOnce.CompareAndSwap(false, true) {
			close(reached)
		}
	}
	cfg := pubsub.SubscriberConfig{
		Bus:     pubsub.Fixed(o.connect.String()),
		Receive: netio.ReceiveParams{BufferSize: o.bufSize, BufferCount: o.bufs},
		Policy:  o.policy,
		OnMessage: func(m pubsub.Message) {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			if o.verify && !checkVerify(m) {
				verifyErrors.Add(1)
			}
			received.Add(1)
			check()
		},
		OnGap: func(g pubsub.Gap) {
			missed.Add(g.Count)
			check()
		},
		OnLost: func(pub string, tags []uint64, err error) {
			fmt.Fprintf(stderr, "subscriptions to %s lost (%d tags): %v; reconnecting\n", pub, len(tags), err)
		},
		OnRestored: func(pub string, tags []uint64) {
			fmt.Fprintf(stderr, "subscriptions to %s restored (%d tags)\n", pub, len(tags))
		},
	}
	cfg.PollerConfig = o.poll.config()
	if o.log {
		cfg.Logger = zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).With().Timestamp().Str("role", "subscribe").Logger()
	}
	sub, err := pubsub.NewSubscriber(mgr, cfg)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.Subscribe(ctx, o.tags...); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "subscribed to %d tags of %s\n", len(o.tags), o.connect)
	var waitErr error
	select {
	case <-reached:
	case <-ctx.Done(): // a signal ends the run cleanly, the timeout does not
		if context.Cause(ctx) == errTimedOut {
			waitErr = fmt.Errorf("%w: received %d, missed %d of --count %d", errTimedOut, received.Load(), missed.Load(), o.count)
		}
	}
	st := sub.Stats()
	closeErr := sub.Close()
	r := subReport{Role: "subscribe", Provider: o.provider, Publisher: o.connect.String(), Tags: len(o.tags),
		Messages: st.Messages, Bytes: st.Bytes, Gaps: st.Gaps, Missed: st.Missed, Resets: st.Resets,
		Verify: o.verify, VerifyErrors: verifyErrors.Load()}
	if f, l := first.Load(), last.Load(); l > f {
		el := time.Duration(l - f)
		r.Seconds = el.Seconds()
		r.MBPerS, r.MsgsPerS = rates(r.Messages, r.Bytes, el)
	}
	if o.json {
		if err := printJSON(stdout, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "subscribe (%s): %d messages, %.3f MB from %s on %d tags in %.3f s: %.4f Mmsg/s, %.1f MB/s; %d gaps, %d missed, %d resets",
			o.provider, r.Messages, float64(r.Bytes)/1e6, r.Publisher, r.Tags, r.Seconds, r.MsgsPerS/1e6, r.MBPerS, r.Gaps, r.Missed, r.Resets)
		if o.verify {
			fmt.Fprintf(stdout, ", verify %d errors", r.VerifyErrors)
		}
		fmt.Fprintln(stdout)
	}
	if waitErr == nil && r.VerifyErrors > 0 {
		waitErr = fmt.Errorf("%d messages failed verification", r.VerifyErrors)
	}
	return firstError(waitErr, closeErr)
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
