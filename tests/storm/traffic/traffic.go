// Package traffic streams verifiable messages through netio-go endpoints
// for the storm and hostile-peer tests: a sender that writes every message
// as the test pattern with a header (package internal/testpattern: the
// header names the stream and sequence number), at a length that varies
// with both, and a checker, plugged into a listener's OnData (or
// OnMessage), that verifies every message, tracks which connection carries
// which stream, and hands data of connections that are not streams (a
// hostile peer's) to a callback.
package traffic

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// Size returns the size of message seq of stream: it varies between
// testpattern.HeaderSize and max, so that lengths are checked too.
func Size(stream, seq uint32, max int) int {
	span := uint32(max - testpattern.HeaderSize + 1)
	return testpattern.HeaderSize + int((stream*2654435761+seq*40503)%span)
}

// newPattern returns the pattern of messages of at most maxSize bytes.
func newPattern(maxSize int) *testpattern.Pattern {
	return testpattern.New(maxSize, testpattern.WithHeader())
}

// Checker verifies the messages of a number of streams arriving over any
// connections of one listener. A connection whose first message is a
// stream message is a stream connection: every later message on it must be
// the next message of the same stream, intact. Data of any other
// connection goes to Foreign.
type Checker struct {
	streams, maxSize int
	pat              *testpattern.Pattern
	// Foreign, if set, receives the data of connections that are not
	// stream connections. It runs on the listener's poller goroutine.
	Foreign func(ep *endpoint.ReceiveEndpoint, data []byte)

	mu       sync.Mutex
	conns    map[*endpoint.ReceiveEndpoint]*connState
	next     []uint32 // next sequence number expected per stream
	errs     []string // the first few problems, for the failure message
	problems int
}

type connState struct {
	foreign bool
	stream  uint64
}

// maxErrs bounds the problems a Checker keeps the text of.
const maxErrs = 10

// NewChecker checks streams 0..streams-1 whose messages are at most
// maxSize bytes: MaxMessage of the senders' buffer size.
func NewChecker(streams, maxSize int) *Checker {
	return &Checker{streams: streams, maxSize: maxSize, pat: newPattern(maxSize),
		conns: make(map[*endpoint.ReceiveEndpoint]*connState), next: make([]uint32, streams)}
}

// OnData is the listener's OnData; with coalesced buffers, OnMessage
// passes it each decoded payload.
func (c *Checker) OnData(ep *endpoint.ReceiveEndpoint, data []byte) {
	c.mu.Lock()
	st, known := c.conns[ep]
	if !known {
		h, ok := testpattern.ParseHeader(data)
		st = &connState{foreign: !ok, stream: h.Stream}
		c.conns[ep] = st
	}
	if st.foreign {
		c.mu.Unlock()
		if c.Foreign != nil {
			c.Foreign(ep, data)
		}
		return
	}
	defer c.mu.Unlock()
	if err := c.check(st.stream, data); err != nil {
		c.problems++
		if len(c.errs) < maxErrs {
			c.errs = append(c.errs, fmt.Sprintf("connection %d: %v", ep.ID(), err))
		}
		return
	}
	c.next[st.stream]++
}

// check verifies that data is the next message of stream: its header
// (stream, sequence number, length), its length and its content.
func (c *Checker) check(stream uint64, data []byte) error {
	if stream >= uint64(c.streams) {
		return fmt.Errorf("unknown stream %d", stream)
	}
	seq := c.next[stream]
	if err := c.pat.Check(data, stream, uint64(seq)); err != nil {
		return err
	}
	if want := Size(uint32(stream), seq, c.maxSize); len(data) != want {
		return fmt.Errorf("stream %d: message %d has %d bytes, want %d", stream, seq, len(data), want)
	}
	return nil
}

// Delivered returns how many messages of stream arrived intact and in
// order so far.
func (c *Checker) Delivered(stream int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.next[stream])
}

// AllDelivered reports whether every stream delivered exactly n messages.
func (c *Checker) AllDelivered(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, got := range c.next {
		if int(got) != n {
			return false
		}
	}
	return true
}

// Report is what a Checker saw.
type Report struct {
	Delivered   []int    // per stream: messages intact and in order
	Total       int      // sum of Delivered
	Problems    int      // messages out of order, damaged, or foreign on a stream connection
	Errors      []string // the first few problems
	Connections int      // stream connections seen
	Foreign     int      // other connections seen
}

// Report returns what the checker saw so far.
func (c *Checker) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Delivered: make([]int, c.streams), Problems: c.problems, Errors: append([]string(nil), c.errs...)}
	for s, n := range c.next {
		r.Delivered[s] = int(n)
		r.Total += int(n)
	}
	for _, st := range c.conns {
		if st.foreign {
			r.Foreign++
		} else {
			r.Connections++
		}
	}
	return r
}

// Short returns the streams that delivered fewer than n messages, with
// what they delivered.
func (r Report) Short(n int) map[int]int {
	short := make(map[int]int)
	for s, got := range r.Delivered {
		if got < n {
			short[s] = got
		}
	}
	return short
}

// Missing describes, per stream that delivered fewer than n messages,
// which message numbers did not arrive, as "stream S: messages A–B of n
// missing". The checker accepts only the next message of a stream, so what
// is missing is always a stream's tail: a message lost in the middle shows
// as a problem (out of order) instead.
func (r Report) Missing(n int) []string {
	var out []string
	for s, got := range r.Delivered {
		if got < n {
			out = append(out, fmt.Sprintf("stream %d: messages %d–%d of %d missing (%d)", s, got, n-1, n, n-got))
		}
	}
	return out
}

// Sender streams one stream over a connection of its own.
type Sender struct {
	Stream uint32
	// Count is how many messages to send; with Until set, the least.
	Count int
	// Until, if set, keeps the stream going after Count messages until it
	// is closed (a stream alongside something that takes its own time),
	// or until Limit messages were sent.
	Until <-chan struct{}
	// Limit bounds the messages sent with Until; 0 means 100 × Count.
	Limit int
	// Params are the send endpoint's; BufferSize is the largest message.
	// Keep BufferCount at most the receiver's BufferCount: sockets
	// livelocks under load with more sends in flight than receives posted.
	Params netio.BufferedSendParams
	// Connected, if set, is called once the connection is up and returns
	// when streaming may start (a barrier for storms).
	Connected func()
	// Coalesced wraps every message in a coalesced buffer of its own
	// (netio3's format, package coalesce), tagged with the stream number,
	// for a listener that decodes with OnMessage.
	Coalesced bool
}

// MaxMessage returns the largest message a sender with buffers of
// bufferSize bytes sends: the Checker's maxSize.
func MaxMessage(bufferSize int, coalesced bool) int {
	if coalesced {
		return bufferSize - coalesce.Overhead(0, true)
	}
	return bufferSize
}

// Result is what a Sender did.
type Result struct {
	Sent, Completed, Failed int
}

// Run dials addr, sends s.Count messages (more with Until), waits for all
// their completions and closes. It returns early with an error when the
// dial fails, a post fails, or ctx ends.
func (s Sender) Run(ctx context.Context, mgr *domain.Manager, addr string) (res Result, err error) {
	var completed, failed atomic.Int64
	wake := make(chan struct{}, 1)
	ep, err := endpoint.Dial(ctx, mgr, addr, endpoint.SendConfig{
		Params: s.Params,
		OnSendCompleted: func(_ uint64, st netio.Status) {
			if st != netio.OK {
				failed.Add(1)
			}
			completed.Add(1)
			select { // never block the poller: one pending wake-up is enough
			case wake <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return res, fmt.Errorf("stream %d: %w", s.Stream, err)
	}
	defer func() {
		res.Completed, res.Failed = int(completed.Load()), int(failed.Load())
		if cerr := ep.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stream %d: close: %w", s.Stream, cerr)
		}
	}()
	if s.Connected != nil {
		s.Connected()
	}
	pat := newPattern(MaxMessage(s.Params.WithDefaults().BufferSize, s.Coalesced))
	for res.Sent < s.Count || s.more(res.Sent) {
		if err := s.sendNext(ctx, ep, pat, uint32(res.Sent), wake); err != nil {
			return res, err
		}
		res.Sent++
	}
	for completed.Load() < int64(res.Sent) {
		if err := await(ctx, wake); err != nil {
			return res, fmt.Errorf("stream %d: %d of %d completions: %w", s.Stream, completed.Load(), res.Sent, err)
		}
	}
	return res, nil
}

// more reports whether Until asks for more messages than sent so far.
func (s Sender) more(sent int) bool {
	if s.Until == nil || sent >= s.limit() {
		return false
	}
	select {
	case <-s.Until:
		return false
	default:
		return true
	}
}

func (s Sender) limit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	return 100 * s.Count
}

// sendNext sends message seq, waiting for a completion while every buffer
// is in flight or the transmit queue is full.
func (s Sender) sendNext(ctx context.Context, ep *endpoint.SendEndpointBuffered, pat *testpattern.Pattern, seq uint32, wake chan struct{}) error {
	buf := ep.GetBuffer()
	for buf == nil {
		if err := await(ctx, wake); err != nil {
			return fmt.Errorf("stream %d: no free buffer for message %d: %w", s.Stream, seq, err)
		}
		buf = ep.GetBuffer()
	}
	n, err := s.fill(buf.Bytes(), pat, seq)
	if err != nil {
		ep.ReleaseBuffer(buf.ID())
		return err
	}
	for {
		switch st := ep.SendBuffer(buf, n); st {
		case netio.OK:
			return nil
		case netio.NoResources: // the buffer is still ours: retry
			if err := await(ctx, wake); err != nil {
				ep.ReleaseBuffer(buf.ID())
				return fmt.Errorf("stream %d: message %d: transmit queue stayed full: %w", s.Stream, seq, err)
			}
		default:
			return fmt.Errorf("stream %d: message %d: send: %v", s.Stream, seq, st)
		}
	}
}

// fill writes message seq into buf and returns the bytes to send.
func (s Sender) fill(buf []byte, pat *testpattern.Pattern, seq uint32) (int, error) {
	size := Size(s.Stream, seq, MaxMessage(len(buf), s.Coalesced))
	if size > pat.MaxLen() {
		return 0, fmt.Errorf("stream %d: message %d of %d bytes, longer than Params.BufferSize allows", s.Stream, seq, size)
	}
	if !s.Coalesced {
		pat.Fill(buf[:size], uint64(s.Stream), uint64(seq))
		return size, nil
	}
	var enc coalesce.Encoder
	enc.Reset(buf)
	msg, err := enc.Reserve(uint64(s.Stream), 0, size)
	if err != nil {
		return 0, fmt.Errorf("stream %d: message %d in a coalesced buffer: %w", s.Stream, seq, err)
	}
	pat.Fill(msg, uint64(s.Stream), uint64(seq))
	return enc.Len(), nil
}

// retryEvery bounds a wait for a completion, in case the wake-up was
// consumed by an earlier wait.
const retryEvery = time.Millisecond

// await waits for a completion's wake-up, a short while, or ctx's end.
func await(ctx context.Context, wake <-chan struct{}) error {
	t := time.NewTimer(retryEvery)
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
