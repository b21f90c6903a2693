package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/latency"
	"github.com/netio-go/netio/internal/poll"
)

// Ping-pong parameters.
const (
	pingPongBufs     = 8  // buffers per endpoint; one message is in flight at a time
	pingPongWarmup   = 10 // round trips left out of the statistics
	pingPongMinTimed = 10 // round trips timed at least, even past the budget
)

// pingPong bounces one message: the client sends a ping on ping, the server
// echoes it (on the same connection, or on pong for rdm, an endpoint each
// way), and the client's callback times the round trip and sends the next
// ping. Everything happens in callbacks, on
// the client's and the server's poller goroutines, so no goroutine hand-off
// adds to the latency.
type pingPong struct {
	size      int
	budget    time.Duration
	maxSample int

	ping, pong atomic.Pointer[bufferSender]

	// Client side, owned by the client's poller goroutine. Times are
	// durations since base (see clock).
	base     time.Time
	deadline time.Duration
	sentAt   time.Duration
	trips    int
	rtts     []time.Duration
	over     bool
	late     int // pongs that came after over (quiesce)

	done chan error // capacity 1: the first outcome
}

func newPingPong(size int, b budget) *pingPong {
	return &pingPong{size: size, budget: b.pingPong, maxSample: b.maxRoundTrips,
		rtts: make([]time.Duration, 0, b.maxRoundTrips), done: make(chan error, 1)}
}

// finish reports the outcome, once.
func (p *pingPong) finish(err error) {
	select {
	case p.done <- err:
	default:
	}
}

// start sends the first ping. It runs on the client's poller goroutine.
func (p *pingPong) start() {
	p.base = time.Now()
	p.deadline = p.budget
	p.sendPing(p.clock())
}

// clock returns the monotonic time since base: one clock read, where
// time.Now makes two (the wall clock too), each 40-80 ns on this VM and on
// the round trip's path. The C baseline (hack/cbaseline pingpong) reads the
// clock once per round trip's span as well.
func (p *pingPong) clock() time.Duration { return time.Since(p.base) }

// sendPing sends the next ping on the client's connection.
func (p *pingPong) sendPing(now time.Duration) {
	p.sentAt = now
	if err := sendOne(*p.ping.Load(), p.size); err != nil {
		p.over = true
		p.finish(fmt.Errorf("ping %d: %w", p.trips, err))
	}
}

// onPing echoes a ping back. It runs on the server's poller goroutine.
func (p *pingPong) onPing(_ *endpoint.ReceiveEndpoint, data []byte) {
	if err := sendOne(*p.pong.Load(), len(data)); err != nil {
		p.finish(fmt.Errorf("echo: %w", err))
	}
}

// onPong records a round trip and sends the next ping, or ends the run. It
// runs on the client's poller goroutine.
func (p *pingPong) onPong(_ *endpoint.ReceiveEndpoint, _ []byte) {
	now := p.clock()
	if p.over {
		p.late++
		return
	}
	p.trips++
	if p.trips > pingPongWarmup {
		p.rtts = append(p.rtts, now-p.sentAt)
	}
	if len(p.rtts) >= p.maxSample || (now > p.deadline && len(p.rtts) >= pingPongMinTimed) {
		p.over = true
		p.finish(nil)
		return
	}
	p.sendPing(now)
}

// sendOne sends one message of size bytes from a free buffer, as it is (the
// content does not matter for timing).
func sendOne(ep bufferSender, size int) error {
	buf := ep.GetBuffer()
	if buf == nil {
		return errors.New("no free send buffer")
	}
	if st := ep.SendBuffer(buf, size); st != netio.OK {
		ep.ReleaseBuffer(buf.ID())
		return st.Err()
	}
	return nil
}

// latency runs the ping-pong for one size and fills the round-trip count and
// the one-way latency percentiles (RTT/2) of row.
func (w *sweeper) latency(ctx context.Context, size int, row *sweepRow) error {
	mgr, b := w.mgr, w.budget
	// The pollers' configuration is the one every other part uses, the
	// library's default unless --poll says otherwise: the ping-pong measures
	// what an application gets, with no latency-only tuning.
	pc := w.poll.config()
	client, err := cq.Open(mgr, pc)
	if err != nil {
		return err
	}
	defer client.Close()
	server, err := cq.Open(mgr, pc)
	if err != nil {
		return err
	}
	defer server.Close()
	p := newPingPong(size, b)
	var l links
	defer l.close()
	if err := p.connect(ctx, mgr, client, server, &l); err != nil {
		return err
	}
	return p.run(ctx, client, row)
}

// run starts the ping-pong on the client's poller goroutine, waits for its
// outcome and fills the round-trip count and the latencies of row.
func (p *pingPong) run(ctx context.Context, client *cq.Poller, row *sweepRow) error {
	poll.Of(client).Do(p.start) // the first ping from the poller goroutine, as every later one
	limit := time.NewTimer(p.budget + 5*time.Second)
	defer limit.Stop()
	var err error
	select {
	case err = <-p.done:
	case <-limit.C:
		err = fmt.Errorf("no outcome after %v: a message was lost?", p.budget+5*time.Second)
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err != nil {
		return err
	}
	row.RoundTrips = len(p.rtts)
	row.LatP50us, row.LatP99us = oneWayPercentiles(p.rtts)
	return nil
}

// links are the two objects of a ping-pong over one connection both ways,
// fi_msg_pingpong's shape: the server's listener and the client's send
// endpoint.
type links struct {
	atServer *endpoint.Listener
	ping     *endpoint.SendEndpointBuffered
}

// connect sets up the connection: the server's listener, which echoes on
// the connection a ping came in on (ListenConfig.Replies), on the server
// poller; the client's send endpoint, which gets the echoes
// (SendConfig.Replies), on the client poller. On error the caller still
// closes what was set up.
func (p *pingPong) connect(ctx context.Context, mgr *domain.Manager, client, server *cq.Poller, l *links) error {
	params := netio.ReceiveParams{BufferSize: p.size, BufferCount: pingPongBufs}
	sendParams := netio.BufferedSendParams{BufferSize: p.size, BufferCount: pingPongBufs}
	var err error
	if l.atServer, err = endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{Params: params,
		Replies: &endpoint.ListenReplies{Params: sendParams}, OnData: p.echo, Runtime: cq.Runtime{Poller: server}}); err != nil {
		return err
	}
	if l.ping, err = endpoint.Dial(ctx, mgr, l.atServer.Addr(), endpoint.SendConfig{Params: sendParams,
		Replies: &endpoint.DialReplies{Params: params, OnReply: func(_ *endpoint.SendEndpointBuffered, d []byte) { p.onPong(nil, d) }},
		Runtime: cq.Runtime{Poller: client}}); err != nil {
		return err
	}
	p.setPing(l.ping)
	return nil
}

// echo sends a ping back on the connection it came in on. It runs on the
// server's poller goroutine.
func (p *pingPong) echo(ep *endpoint.ReceiveEndpoint, data []byte) {
	if err := sendOne(ep, len(data)); err != nil {
		p.finish(fmt.Errorf("echo: %w", err))
	}
}

// setLinks sets where pings and their echoes go (rdm: an endpoint each way).
func (p *pingPong) setLinks(ping, pong bufferSender) {
	p.setPing(ping)
	p.pong.Store(&pong)
}

// setPing sets where pings go.
func (p *pingPong) setPing(ping bufferSender) { p.ping.Store(&ping) }

// close closes what connect set up, the send endpoint first.
func (l *links) close() {
	if l.ping != nil {
		_ = l.ping.Close()
	}
	if l.atServer != nil {
		_ = l.atServer.Close()
	}
}

// oneWayPercentiles returns the 50th and 99th percentile of the one-way
// latency (half the round trip) in microseconds. It sorts rtts.
func oneWayPercentiles(rtts []time.Duration) (p50, p99 float64) {
	slices.Sort(rtts)
	return latency.OneWayQuantile(rtts, 0.50), latency.OneWayQuantile(rtts, 0.99)
}
