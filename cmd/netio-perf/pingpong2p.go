package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/latency"
)

// The two-process ping-pong (server and client --mode pingpong), in the
// shape of fabtests' fi_msg_pingpong: the client bounces one message of
// --size bytes off the server --count times and prints the one-way latency
// (half the round trip) as p50, p99 and mean. Like fi_msg_pingpong it runs
// over one connection that carries both directions: the client dials with
// endpoint.DialReplies and sends a hello naming the size of its pings; the
// server's listener has endpoint.ListenReplies, answers the hello with one
// ready message on the same connection, then echoes every message that
// arrives. Every ping and echo is sent from a poller callback, as in the
// sweep's ping-pong.

// modePingPong is the server's and client's --mode for the ping-pong; their
// default is modeSend (stream messages one way).
const modePingPong = "pingpong"

// maxPingPongIterations bounds --count in ping-pong mode: every round trip's
// time is kept (8 bytes each) for the percentiles.
const maxPingPongIterations = 10_000_000

// helloPrefix starts the hello, the first message on the client's
// connection; the size of the client's pings follows it, in decimal. Its
// version (2) tells a server of the two-connection shape (1) to refuse it.
const helloPrefix = "netio-perf pingpong 2 size="

// maxHelloSize bounds the ping size a hello may name.
const maxHelloSize = 1 << 30

// errHello marks a first message that is not a ping-pong hello.
var errHello = errors.New("not a netio-perf ping-pong hello")

// hello returns the hello naming the ping size.
func hello(size int) []byte { return []byte(helloPrefix + strconv.Itoa(size)) }

// parseHello returns the ping size a hello names. It is parsed off the
// wire: anything but helloPrefix and a size in 0..maxHelloSize written as
// hello writes it (no sign, no leading zeros) is an error matching
// errHello.
func parseHello(msg []byte) (int, error) {
	rest, ok := strings.CutPrefix(string(msg), helloPrefix)
	if !ok {
		return 0, fmt.Errorf("%w: %.40q", errHello, msg)
	}
	size, err := strconv.Atoi(rest)
	if err != nil || size < 0 || size > maxHelloSize || strconv.Itoa(size) != rest {
		return 0, fmt.Errorf("%w: ping size %.20q: want 0..%d", errHello, rest, maxHelloSize)
	}
	return size, nil
}

// peerFlags are the flags the server and the client share beyond
// commonFlags: --mode, and the fabtests names of --bufs and --count.
type peerFlags struct {
	mode string
}

// register adds --mode and the aliases --window (for --bufs) and
// --iterations (for --count), so that a fabtests user's habits work.
func (p *peerFlags) register(fs *flag.FlagSet, bufs *int, count *uint64) {
	p.mode = modeSend
	fs.Func("mode", "send (stream messages one way, the default) or pingpong (bounce one message, print one-way latency p50/p99/mean like fi_msg_pingpong; the server serves one client, then exits)", func(s string) error {
		if s != modeSend && s != modePingPong {
			return fmt.Errorf("want %s or %s", modeSend, modePingPong)
		}
		p.mode = s
		return nil
	})
	fs.IntVar(bufs, "window", *bufs, "alias of --bufs (fabtests' name)")
	fs.Uint64Var(count, "iterations", *count, "alias of --count (fabtests' name)")
}

// check rejects a ping-pong count the percentiles cannot hold.
func (p *peerFlags) check(count uint64) error {
	if p.mode == modePingPong && (count < 1 || count > maxPingPongIterations) {
		return fmt.Errorf("--count: want 1..%d round trips with --mode %s", maxPingPongIterations, modePingPong)
	}
	return nil
}

// pingPongReport is what both sides print: one-way latencies in µs (half
// the round trip) at the client; the round trips echoed at the server.
type pingPongReport struct {
	Role       string  `json:"role"`
	Provider   string  `json:"provider"`
	Mode       string  `json:"mode"`
	Size       int     `json:"size,omitempty"`
	RoundTrips int     `json:"round_trips"`
	Seconds    float64 `json:"seconds"`
	LatP50us   float64 `json:"latency_p50_us,omitempty"`
	LatP99us   float64 `json:"latency_p99_us,omitempty"`
	LatMeanus  float64 `json:"latency_mean_us,omitempty"`
}

// print writes the report as one JSON line or one line of text.
func (r pingPongReport) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	if r.Role == "server" {
		_, err := fmt.Fprintf(w, "server (%s): pingpong, %d messages echoed in %.3f s\n", r.Provider, r.RoundTrips, r.Seconds)
		return err
	}
	_, err := fmt.Fprintf(w, "client (%s): pingpong %s, %d round trips in %.3f s: one-way latency p50 %.2f µs, p99 %.2f µs, mean %.2f µs\n",
		r.Provider, formatSize(r.Size), r.RoundTrips, r.Seconds, r.LatP50us, r.LatP99us, r.LatMeanus)
	return err
}

// echoer is the server side: it checks the hello, answers it with the
// ready message and echoes every later message back on the same
// connection. Its callbacks run on the server's poller goroutine.
type echoer struct {
	bufSize int    // the server's buffers: the largest ping it can echo
	pingID  uint64 // the client's connection, once its hello arrived (+1); poller goroutine only
	echoed  atomic.Uint64
	failed  atomic.Pointer[error]
	done    chan struct{} // closed when the client's connection ends or on failure
	closing atomic.Bool
}

func newEchoer(bufSize int) *echoer {
	return &echoer{bufSize: bufSize, done: make(chan struct{})}
}

// onData takes the hello on the first connection, then echoes. A message
// from a second client, or a hello the server cannot serve, fails the run.
func (e *echoer) onData(ep *endpoint.ReceiveEndpoint, data []byte) {
	if e.failed.Load() != nil {
		return // the run is over
	}
	if e.pingID == ep.ID()+1 {
		if err := sendOne(ep, len(data)); err != nil {
			e.fail(fmt.Errorf("echo %d: %w", e.echoed.Load(), err))
			return
		}
		e.echoed.Add(1)
		return
	}
	if e.pingID != 0 {
		e.fail(errors.New("a message from a second client"))
		return
	}
	e.pingID = ep.ID() + 1
	size, err := parseHello(data)
	if err == nil && size > e.bufSize {
		err = fmt.Errorf("pings of %d bytes, larger than the server's --buf-size %d", size, e.bufSize)
	}
	if err == nil {
		err = sendOne(ep, 1) // ready
	}
	if err != nil {
		e.fail(err)
	}
}

// onReceiveError fails the run on a message the server could not take: a
// hello or ping larger than --buf-size (tcp then also drops the
// connection, so the client learns of it at once).
func (e *echoer) onReceiveError(_ *endpoint.ReceiveEndpoint, err error) {
	e.fail(fmt.Errorf("a message larger than the server's --buf-size %d: %w", e.bufSize, err))
}

// onClosed ends the run when the client's connection ends.
func (e *echoer) onClosed(ep *endpoint.ReceiveEndpoint, _ error) {
	if e.pingID == ep.ID()+1 && e.closing.CompareAndSwap(false, true) {
		close(e.done)
	}
}

// fail keeps the first failure and ends the run.
func (e *echoer) fail(err error) {
	if e.failed.CompareAndSwap(nil, &err) && e.closing.CompareAndSwap(false, true) {
		close(e.done)
	}
}

// runPingPongServer is server --mode pingpong: it serves one client, then
// exits.
func runPingPongServer(ctx context.Context, o serverOptions, stdout, stderr io.Writer) error {
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (*domain.Manager, error) {
		return domain.Open(domain.Config{Provider: o.provider, Address: o.listen.IP, Logger: o.logger(stderr)})
	})
	if err != nil {
		return err
	}
	defer done()
	poller, err := cq.Open(mgr, o.poll.config())
	if err != nil {
		return err
	}
	defer poller.Close()
	e := newEchoer(o.bufSize)
	l, err := endpoint.Listen(mgr, o.listen.String(), endpoint.ListenConfig{
		Params:  netio.ReceiveParams{BufferSize: o.bufSize, BufferCount: pingPongBufs},
		Replies: &endpoint.ListenReplies{Params: netio.BufferedSendParams{BufferSize: o.bufSize, BufferCount: pingPongBufs}},
		OnData:  e.onData, OnConnectionClosed: e.onClosed, OnReceiveError: e.onReceiveError,
		Runtime: cq.Runtime{Poller: poller}})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Fprintf(stdout, "LISTENING %s\n", l.Addr())
	fmt.Fprintf(stderr, "listening on %s (ping-pong)\n", l.Addr())
	start := time.Now()
	runErr := e.serve(ctx)
	r := pingPongReport{Role: "server", Provider: o.provider, Mode: modePingPong,
		RoundTrips: int(e.echoed.Load()), Seconds: time.Since(start).Seconds()}
	if err := r.print(stdout, o.json); err != nil {
		return err
	}
	return runErr
}

// serve echoes until the client's connection ends, a failure, or the
// context ends (a signal is a clean exit, the timeout is not).
func (e *echoer) serve(ctx context.Context) error {
	select {
	case <-e.done:
		return e.outcome()
	case <-ctx.Done():
		return ctxOutcome(ctx)
	}
}

// outcome is the first failure, or nil.
func (e *echoer) outcome() error {
	if p := e.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// ctxOutcome is nil when the context ended by a signal (cancel), its cause
// when it timed out.
func ctxOutcome(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return nil
	}
	return context.Cause(ctx)
}

// pinger is the client side: the sweep's pingPong, started by the server's
// ready message. Its callback runs on the client's poller goroutine.
type pinger struct {
	p     *pingPong
	ready bool // the ready message arrived; poller goroutine only
}

// onReply starts the ping-pong on the ready message, then times pongs.
func (c *pinger) onReply(_ *endpoint.SendEndpointBuffered, data []byte) {
	if !c.ready {
		c.ready = true
		c.p.start()
		return
	}
	c.p.onPong(nil, data)
}

// onClosed ends the run when the connection ends before the last round
// trip: a server that refused the hello (or failed) closes it, and the
// client then exits with that reason instead of waiting out --timeout.
// After a finished run the outcome is already in and this changes nothing.
func (c *pinger) onClosed(err error) {
	c.p.finish(fmt.Errorf("the server ended the connection (see its output for why): %w", err))
}

// runPingPongClient is client --mode pingpong.
func runPingPongClient(ctx context.Context, o clientOptions, stdout, stderr io.Writer) error {
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (*domain.Manager, error) {
		return openToward(o.provider, o.connect, o.local, o.logger(stderr))
	})
	if err != nil {
		return err
	}
	defer done()
	poller, err := cq.Open(mgr, o.poll.config())
	if err != nil {
		return err
	}
	defer poller.Close()
	// No time bound but the timeout: the run ends after --count timed
	// round trips, as fi_msg_pingpong's after its iterations.
	c := &pinger{p: newPingPong(o.size, budget{pingPong: 365 * 24 * time.Hour, maxRoundTrips: int(o.count)})}
	start := time.Now()
	if err := c.run(ctx, mgr, poller, o.connect.String(), o.size); err != nil {
		return err
	}
	r := pingPongReport{Role: "client", Provider: o.provider, Mode: modePingPong, Size: o.size,
		RoundTrips: len(c.p.rtts), Seconds: time.Since(start).Seconds(), LatMeanus: latency.OneWayMean(c.p.rtts)}
	r.LatP50us, r.LatP99us = oneWayPercentiles(c.p.rtts)
	return r.print(stdout, o.json)
}

// run dials the server with room for its echoes, sends the hello and
// waits for the ping-pong's outcome.
func (c *pinger) run(ctx context.Context, mgr *domain.Manager, poller *cq.Poller, server string, size int) error {
	h := hello(size)
	ping, err := endpoint.Dial(ctx, mgr, server, endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: max(size, len(h)), BufferCount: pingPongBufs},
		Replies: &endpoint.DialReplies{Params: netio.ReceiveParams{BufferSize: max(size, 1), BufferCount: pingPongBufs},
			OnReply: c.onReply},
		OnConnectionClosed: c.onClosed,
		Runtime:            cq.Runtime{Poller: poller}})
	if err != nil {
		return err
	}
	defer ping.Close()
	c.p.setPing(ping)
	if err := sendBytes(ping, h); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	select {
	case err := <-c.p.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// sendBytes sends msg from a free buffer.
func sendBytes(ep *endpoint.SendEndpointBuffered, msg []byte) error {
	buf := ep.GetBuffer()
	if buf == nil {
		return errors.New("no free send buffer")
	}
	n := copy(buf.Bytes(), msg)
	if st := ep.SendBuffer(buf, n); st != netio.OK {
		ep.ReleaseBuffer(buf.ID())
		return st.Err()
	}
	return nil
}
