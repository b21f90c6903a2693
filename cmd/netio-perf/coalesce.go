package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// modeCoalesce is the sweep mode that streams small messages through a
// coalescing send endpoint (SendMessage) into a listener that decodes them
// (OnMessage), counted at the receiver's callback.
const modeCoalesce = "coalesce"

// Coalescing defaults and limits.
const (
	// defaultCoalesceBufSize is the size of a coalescing buffer: about a
	// thousand 64 B messages per libfabric send, the size the endpoint's
	// benchmarks found best on tcp.
	defaultCoalesceBufSize = 64 * kib
	// maxCoalesceBufSize bounds --buf-size: the sweep may register up to
	// 256 send and 256 receive buffers of it (--window, --rx-bufs) in one
	// process.
	maxCoalesceBufSize = 16 * mib
	// deadlineStride is how many messages the coalescing sender takes
	// between looks at the clock and the context: a message costs tens of
	// nanoseconds, so looking for each would be a measurable share of it.
	deadlineStride = 1024
	// coalesceInFlight is about how many bytes of coalescing buffers the
	// sweep keeps in flight by default. Buffers that stay in the cache
	// matter more than many in flight: on these machines (2 MiB of L2 per
	// core) 4 buffers of 64 KiB, with 8 posted at the receiver, took a
	// median 46 ns of CPU per 64 B message and 128 (256 posted) 86 ns,
	// and they moved messages at least as fast.
	coalesceInFlight = 256 * kib
)

// coalesceWindow returns the default number of coalescing buffers of
// bufSize bytes: about coalesceInFlight, between 4 and 128.
func coalesceWindow(bufSize int) int {
	return max(4, min(128, coalesceInFlight/bufSize))
}

// defaultCoalesceSizes is what --mode coalesce measures without --sizes:
// the small messages coalescing is for.
var defaultCoalesceSizes = []int{64}

// coalesceFlags are the flags of the coalescing send path, shared by the
// sweep (--mode coalesce) and the client (--coalesce).
type coalesceFlags struct {
	bufSize       int
	flushInterval time.Duration
}

// register adds --buf-size and --flush-interval to fs, with their defaults.
func (c *coalesceFlags) register(fs *cmdLine, scope string) {
	c.bufSize, c.flushInterval = defaultCoalesceBufSize, endpoint.DefaultCoalesceFlushInterval
	fs.Var(sizeFlag{&c.bufSize}, "buf-size", scope+": size of each coalescing buffer, the bytes one libfabric send carries (at most 16M)")
	fs.DurationVar(&c.flushInterval, "flush-interval", c.flushInterval, scope+": longest a coalescing buffer waits for more messages before it is sent")
}

// check validates the flags for messages of up to maxSize bytes. Unless
// on, neither flag may be given: they would silently do nothing.
func (c *coalesceFlags) check(fs *cmdLine, on bool, scope string, maxSize int) error {
	if !on {
		if fs.isSet("buf-size") || fs.isSet("flush-interval") {
			return fmt.Errorf("--buf-size and --flush-interval need %s", scope)
		}
		return nil
	}
	// The messages here have status 0; a buffer's first one carries its tag.
	overhead := coalesce.Overhead(0, true)
	switch {
	case c.flushInterval <= 0:
		return fmt.Errorf("--flush-interval %v: must be positive", c.flushInterval)
	case c.bufSize > maxCoalesceBufSize:
		return fmt.Errorf("--buf-size %d: at most %s", c.bufSize, formatSize(maxCoalesceBufSize))
	case maxSize+overhead > c.bufSize:
		return fmt.Errorf("--buf-size %d: a %d B message needs at least %d (%d B of framing)",
			c.bufSize, maxSize, maxSize+overhead, overhead)
	}
	return nil
}

// sendConfig returns the configuration of a coalescing endpoint that feeds
// s: bufs buffers of the coalescing size, every completion waking the
// sending goroutine. The wake-up per completion is cheap here: a buffer
// carries hundreds of messages, so completions are few.
func (c coalesceFlags) sendConfig(s *sender, bufs int, pc cq.Config) endpoint.SendConfig {
	cfg := s.config(bufs, pc)
	s.lowWater = math.MaxUint64
	cfg.Params.BufferSize = c.bufSize
	cfg.Coalesce = &endpoint.CoalesceConfig{FlushInterval: c.flushInterval}
	return cfg
}

// dialCoalescing connects s through a coalescing endpoint and returns its
// Close.
func (s *sender) dialCoalescing(ctx context.Context, mgr *domain.Manager, addr string, c coalesceFlags, bufs int, pc cq.Config) (func() error, error) {
	ep, err := endpoint.Dial(ctx, mgr, addr, c.sendConfig(s, bufs, pc))
	if err != nil {
		return nil, err
	}
	s.ep = ep
	return ep.Close, nil
}

// sendMessages hands messages to SendMessage until count were taken, the
// deadline (if not zero) passed, the context ended or the connection
// failed, and returns how many were taken. With a pattern, message k has
// tag k and the pattern of message k as its payload; without, every
// message has tag 0 and zero bytes, as one stream of a front-end would.
// s.sent counts messages here (not buffers); it is published when the
// sender waits and when it returns, not per message, to keep the loop to
// the copy.
func (s *sender) sendMessages(ctx context.Context, count uint64, deadline time.Time) (uint64, error) {
	zeros := make([]byte, s.size)
	k := s.sent.Load()
	defer func() { s.sent.Store(k) }()
	for k < count {
		if k%deadlineStride == 0 {
			if err := ctx.Err(); err != nil {
				return k, fmt.Errorf("after %d messages: %w", k, context.Cause(ctx))
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				break
			}
		}
		tag, data := uint64(0), zeros
		if s.pat != nil {
			tag, data = k, s.pat.Bytes(0, k, s.size)
		}
		switch st := s.ep.SendMessage(tag, data); st {
		case netio.OK:
			k++
		case netio.NoResources: // every buffer is in flight: wait for one
			s.sent.Store(k)
			if err := s.wait(ctx); err != nil {
				return k, err
			}
		case netio.Closed:
			return k, fmt.Errorf("message %d: %w", k, s.closedErr())
		default:
			return k, fmt.Errorf("message %d: %w", k, st.Err())
		}
	}
	return k, nil
}

// flushMessages sends the partly filled buffer, then waits until every
// coalesced buffer has completed and reports the sends that failed.
func (s *sender) flushMessages(ctx context.Context) error {
	for st := s.ep.Flush(); st != netio.OK; st = s.ep.Flush() {
		switch st {
		case netio.NoResources: // the transmit queue is full
			if err := s.wait(ctx); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
		case netio.Closed:
			return fmt.Errorf("flush: %w", s.closedErr())
		default:
			return fmt.Errorf("flush: %w", st.Err())
		}
	}
	buffers := s.ep.CoalesceStats().Buffers
	for s.done() < buffers {
		if err := s.wait(ctx); err != nil {
			return fmt.Errorf("%d of %d coalesced buffers still pending: %w", buffers-s.done(), buffers, err)
		}
	}
	if f := s.failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d coalesced buffers failed", f, buffers)
	}
	return nil
}

// coalescedReport summarises what a coalescing client did: messages and
// bytes are what SendMessage took, failed sends are coalesced buffers.
func (s *sender) coalescedReport(provider string, elapsed time.Duration) report {
	st := s.ep.CoalesceStats()
	r := report{
		Role: "client", Provider: provider, Size: s.size,
		Messages: st.Messages, Bytes: st.Bytes, Buffers: st.Buffers,
		Verify: s.pat != nil, FailedSends: s.failed.Load(),
	}
	r.setRates(elapsed)
	return r
}

// onMessage is the server's OnMessage: with verification the tag must be
// the message's sequence number on its connection; then the payload is
// counted and checked as onData does.
func (s *sink) onMessage(ep *endpoint.ReceiveEndpoint, tag uint64, data []byte, _ uint8) {
	if s.pat != nil && s.verifierFor(ep.ID()).Seek(tag) != nil {
		s.verifyErrors.Add(1)
	}
	s.onData(ep, data)
}

// messageCounter counts, and with a pattern verifies, the messages one
// connection's OnMessage receives in the sweep. It does the least per
// message that still counts each one at the callback: an atomic add, a
// length check and an atomic load; the clock is read once, for the last
// message.
type messageCounter struct {
	size int
	pat  *testpattern.Pattern // nil: no verification
	v    testpattern.Checker  // poller goroutine only
	base time.Time

	received atomic.Uint64
	target   atomic.Uint64 // messages sent; MaxUint64 until the sender is done
	end      atomic.Int64  // when the target was reached, since base, +1 so that 0 means unset

	wrongSize, verifyErrors, receiveErrors atomic.Uint64

	reached chan struct{} // capacity 1: the target was reached
}

func newMessageCounter(size int, pat *testpattern.Pattern) *messageCounter {
	c := &messageCounter{size: size, pat: pat, v: testpattern.Checker{Pattern: pat}, base: time.Now(), reached: make(chan struct{}, 1)}
	c.target.Store(math.MaxUint64)
	return c
}

// listenConfig returns a listener configuration that decodes coalesced
// buffers into the counter, with bufs receive buffers of bufSize bytes.
func (c *messageCounter) listenConfig(bufSize, bufs int, pc cq.Config) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Params:         netio.ReceiveParams{BufferSize: bufSize, BufferCount: bufs},
		OnMessage:      c.onMessage,
		OnReceiveError: func(*endpoint.ReceiveEndpoint, error) { c.receiveErrors.Add(1) },
		Runtime:        cq.Runtime{PollerConfig: pc},
	}
}

// onMessage counts one message. It runs on the listener's poller goroutine.
func (c *messageCounter) onMessage(_ *endpoint.ReceiveEndpoint, tag uint64, data []byte, _ uint8) {
	if len(data) != c.size {
		c.wrongSize.Add(1)
	}
	if c.pat != nil {
		tagErr := c.v.Seek(tag)
		if c.v.Check(data) != nil || tagErr != nil {
			c.verifyErrors.Add(1)
		}
	}
	if c.received.Add(1) == c.target.Load() {
		c.finish()
	}
}

// finish records when the target was reached (the first caller wins) and
// wakes the waiter.
func (c *messageCounter) finish() {
	c.end.CompareAndSwap(0, int64(time.Since(c.base))+1)
	select {
	case c.reached <- struct{}{}:
	default:
	}
}

// await sets the target to sent and waits until that many messages have
// arrived, for at most limit. It returns when the last one arrived. The
// callback may have counted the last message before the target was set:
// then this goroutine sees the count and stamps the time itself.
func (c *messageCounter) await(ctx context.Context, sent uint64, limit time.Duration) (time.Time, error) {
	c.target.Store(sent)
	if c.received.Load() >= sent {
		c.finish()
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-c.reached:
		return c.base.Add(time.Duration(c.end.Load() - 1)), nil
	case <-t.C:
		return time.Time{}, fmt.Errorf("only %d of %d messages arrived within %v (%d receive errors)",
			c.received.Load(), sent, limit, c.receiveErrors.Load())
	case <-ctx.Done():
		return time.Time{}, context.Cause(ctx)
	}
}

// check returns an error when any message arrived wrong.
func (c *messageCounter) check() error {
	var errs []error
	if n := c.wrongSize.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d messages arrived with a size other than %d", n, c.size))
	}
	if n := c.verifyErrors.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d messages failed verification", n))
	}
	if n := c.receiveErrors.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d receive errors", n))
	}
	return errors.Join(errs...)
}

// coalesced streams size-byte messages from one goroutine calling
// SendMessage as fast as the endpoint takes them into a listener decoding
// them with OnMessage, until the throughput time or byte budget is spent
// (the message bound of the other modes does not apply: coalesced
// messages are cheap). It is timed from the first SendMessage to the last
// OnMessage; CPU time is the whole process's over the same span.
func (w *sweeper) coalesced(ctx context.Context, size int) (sweepRow, error) {
	fmt.Fprintf(w.progress, "sweep: %s coalesced, %s buffers ...\n", formatSize(size), formatSize(w.coalesce.bufSize))
	window, rxBufs := w.windows(coalesceWindow(w.coalesce.bufSize))
	row := sweepRow{Size: size, Window: window, RxBufs: rxBufs, BufSize: w.coalesce.bufSize,
		FlushIntervalUs: float64(w.coalesce.flushInterval) / float64(time.Microsecond), Verify: w.verify}
	var pat *testpattern.Pattern
	if w.verify {
		pat = testpattern.New(size)
	}
	c := newMessageCounter(size, pat)
	l, err := endpoint.Listen(w.mgr, "127.0.0.1:0", c.listenConfig(w.coalesce.bufSize, rxBufs, w.poll.config()))
	if err != nil {
		return row, err
	}
	defer l.Close()
	s := newSender(size, pat)
	closeEndpoint, err := s.dialCoalescing(ctx, w.mgr, l.Addr(), w.coalesce, window, w.poll.config())
	if err != nil {
		return row, err
	}
	defer closeEndpoint()
	m := startMeter()
	sent, err := s.sendMessages(ctx, uint64(w.budget.maxBytes/int64(size)), m.start.Add(w.budget.throughput))
	if err == nil {
		err = s.flushMessages(ctx)
	}
	if err != nil {
		return row, err
	}
	last, err := c.await(ctx, sent, 5*time.Second)
	cpu := cpuTime() - m.cpu0
	if err == nil {
		err = c.check()
	}
	if err != nil {
		return row, err
	}
	st := s.ep.CoalesceStats()
	row.Sent, row.Buffers = st.Messages, st.Buffers
	row.FullFlushes, row.IntervalFlushes, row.ExplicitFlushes = st.FullFlushes, st.IntervalFlushes, st.ExplicitFlushes
	row.Messages = c.received.Load()
	row.Bytes = row.Messages * uint64(size) // every message had the size: c.check
	elapsed := last.Sub(m.start)
	row.Seconds = elapsed.Seconds()
	row.MBPerS, row.MsgsPerS = rates(row.Messages, row.Bytes, elapsed)
	row.setCPU(cpu)
	return row, nil
}
