package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

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
	subscribeFaults
}

// maxTagList bounds --tags of publish and subscribe (a subscriber sends
// them in requests of pubsub.MaxTagsPerRequest at most).
const maxTagList = 1 << 16

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
		if b-a >= maxTagList || len(out)+int(b-a) >= maxTagList {
			return nil, fmt.Errorf("more than %d tags", maxTagList)
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
	connect := fs.String("connect", "", "the publisher's subscription port, IP:PORT with an IP literal or localhost, not a host name (required)")
	tags := fs.String("tags", "", "tags to subscribe: a list of numbers and ranges, e.g. 0,3,10-19 (required)")
	fs.StringVar(&o.local, "local", "", "local IP address for the data listener (default: the address routed to the publisher)")
	fs.Uint64Var(&o.count, "count", 0, "exit once this many messages were received or reported missing, over all tags (0: until SIGINT/SIGTERM)")
	policy := fs.String("policy", "", "ask the publisher for block or drop (default: the publisher's)")
	fs.Var(sizeFlag{&o.bufSize}, "buf-size", "receive buffer size (at least the publisher's --buf-size)")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "receive buffers posted")
	fs.BoolVar(&o.verify, "verify", false, "check every message's number, tag and bytes (publish --verify)")
	fs.BoolVar(&o.log, "log", false, "log connection and subscription events to stderr")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long (0: none; without --count the default is none)")
	o.registerFaults(fs)
	if err := fs.parse(args); err != nil {
		return o, err
	}
	var err error
	if err := o.subscribeFaults.check(); err != nil {
		return o, fs.fail(err)
	}
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
	Moves        uint64  `json:"moves"`   // tags whose count went over to another publisher
	Seconds      float64 `json:"seconds"` // first message to last
	MsgsPerS     float64 `json:"msgs_per_s"`
	MBPerS       float64 `json:"mb_per_s"`
	CPUSeconds   float64 `json:"cpu_seconds"`  // this process, user+sys, from Subscribe to the end
	CtxSwitches  int64   `json:"ctx_switches"` // this process's threads switched off a CPU (voluntarily or not), over the same span
	Verify       bool    `json:"verify"`
	VerifyErrors uint64  `json:"verify_errors"`
	// Churn is what --churn did, and where it left the subscriber.
	Churn *churnReport `json:"churn,omitempty"`
}

// newSubReport starts the subscriber's report from its options and the
// subscriber's counters.
func newSubReport(o subscribeOptions, st pubsub.SubscriberStats) subReport {
	return subReport{Role: "subscribe", Provider: o.provider, Publisher: o.connect.String(), Tags: len(o.tags),
		Messages: st.Messages, Bytes: st.Bytes, Gaps: st.Gaps, Missed: st.Missed, Resets: st.Resets, Moves: st.Moves,
		Verify: o.verify}
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
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: local, Logger: o.roleLogger(stderr, "subscribe", o.log)})
	if err != nil {
		return err
	}
	defer mgr.Close()
	var pat *testpattern.Pattern
	if o.verify {
		pat = verifyPattern(o.bufSize) // no message is larger than a receive buffer
	}
	tally := newSubTally(o.count, pat, o.staller())
	cfg := pubsub.SubscriberConfig{
		Bus:       pubsub.Fixed(o.connect.String()),
		Receive:   netio.ReceiveParams{BufferSize: o.bufSize, BufferCount: o.bufs},
		Policy:    o.policy,
		OnMessage: tally.onMessage(),
		OnBuffer:  tally.onBuffer,
		OnGap:     tally.onGap,
		OnLost: func(pub string, tags []uint64, err error) {
			fmt.Fprintf(stderr, "subscriptions to %s lost (%d tags): %v; reconnecting\n", pub, len(tags), err)
		},
		OnRestored: func(pub string, tags []uint64) {
			fmt.Fprintf(stderr, "subscriptions to %s restored (%d tags)\n", pub, len(tags))
		},
	}
	cfg.PollerConfig = o.poll.config()
	cfg.Logger = o.roleLogger(stderr, "subscribe", o.log)
	if o.log {
		logFirstMessage(&cfg, stderr)
	}
	sub, err := pubsub.NewSubscriber(mgr, cfg)
	if err != nil {
		return err
	}
	defer sub.Close()
	base := takeBaseline(mgr)
	if err := sub.Subscribe(ctx, o.tags...); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "subscribed to %d tags of %s\n", len(o.tags), o.connect)
	cpu0, sw0 := cpuTime(), ctxSwitches()
	var waitErr error
	var churn *churnReport
	if o.churn > 0 {
		churn, waitErr = runChurn(ctx, sub, mgr, o.tags, o.churn, base)
	} else {
		select {
		case <-tally.reached:
		case <-ctx.Done(): // a signal ends the run cleanly, the timeout does not
			if context.Cause(ctx) == errTimedOut {
				waitErr = fmt.Errorf("%w: received %d, missed %d of --count %d", errTimedOut, tally.received.Load(), tally.missed.Load(), o.count)
			}
		}
	}
	cpu, switches := cpuTime()-cpu0, ctxSwitches()-sw0
	closeErr := sub.Close()
	st := sub.Stats() // after Close: the buffer that reached --count is counted whole
	r := newSubReport(o, st)
	r.CPUSeconds, r.CtxSwitches, r.VerifyErrors, r.Churn = cpu.Seconds(), switches, tally.verifyErrors.Load(), churn
	if el := tally.elapsed(); el > 0 {
		r.Seconds = el.Seconds()
		r.MBPerS, r.MsgsPerS = rates(r.Messages, r.Bytes, el)
	}
	if o.json {
		if err := printJSON(stdout, r); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "subscribe (%s): %d messages, %.3f MB from %s on %d tags in %.3f s: %.4f Mmsg/s, %.1f MB/s; %d gaps, %d missed, %d resets, %d moves",
			o.provider, r.Messages, float64(r.Bytes)/1e6, r.Publisher, r.Tags, r.Seconds, r.MsgsPerS/1e6, r.MBPerS, r.Gaps, r.Missed, r.Resets, r.Moves)
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
