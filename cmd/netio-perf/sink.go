package main

import (
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// sink counts, and with a pattern verifies, what a listener receives on all
// its connections. Its callbacks run on the listener's poller goroutine and
// never block; the counters may be read from any goroutine.
type sink struct {
	pat *testpattern.Pattern // nil: no verification
	// unordered verifies the messages of an rdm endpoint instead (nil:
	// none); poller goroutine only, until the endpoint is closed.
	unordered *testpattern.Unordered
	target    uint64 // messages after which reached is closed; 0: none
	base      time.Time

	conns map[uint64]*testpattern.Checker // per connection ID; poller goroutine only
	hit   bool                            // reached was closed; poller goroutine only

	messages, bytes, verifyErrors, receiveErrors atomic.Uint64
	accepted                                     atomic.Uint64
	open                                         atomic.Int64
	first, last                                  atomic.Int64 // since base, +1 so that 0 means unset

	reached chan struct{} // closed once target messages arrived
	closed  chan struct{} // capacity 1: a connection ended
}

// newSink returns a sink that verifies against pat (nil: no verification)
// and closes reached after target messages (0: never).
func newSink(pat *testpattern.Pattern, target uint64) *sink {
	return &sink{
		pat: pat, target: target, base: time.Now(),
		conns:   make(map[uint64]*testpattern.Checker),
		reached: make(chan struct{}),
		closed:  make(chan struct{}, 1),
	}
}

// listenConfig returns a listener configuration whose callbacks feed the
// sink, with bufs receive buffers of bufSize bytes per connection and its
// own poller configured by pc.
func (s *sink) listenConfig(bufSize, bufs int, pc cq.Config) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Params:                  netio.ReceiveParams{BufferSize: bufSize, BufferCount: bufs},
		OnData:                  s.onData,
		OnConnectionEstablished: s.onEstablished,
		OnConnectionClosed:      s.onClosed,
		OnReceiveError:          s.onReceiveError,
		Runtime:                 cq.Runtime{PollerConfig: pc},
	}
}

// onData counts (and verifies) one message.
func (s *sink) onData(ep *endpoint.ReceiveEndpoint, data []byte) {
	s.received(data, s.pat != nil && s.verifierFor(ep.ID()).Check(data) != nil)
}

// received counts one message, and one verify error if bad.
func (s *sink) received(data []byte, bad bool) {
	now := int64(time.Since(s.base)) + 1
	s.first.CompareAndSwap(0, now)
	s.last.Store(now)
	if bad {
		s.verifyErrors.Add(1)
	}
	s.bytes.Add(uint64(len(data)))
	s.messages.Add(1)
	s.checkTarget()
}

// onReceiveError counts a lost message. With verification it also counts as
// a verify error, and the connection's message counter moves past it.
func (s *sink) onReceiveError(ep *endpoint.ReceiveEndpoint, _ error) {
	s.receiveErrors.Add(1)
	if s.pat != nil {
		s.verifierFor(ep.ID()).Lost()
		s.verifyErrors.Add(1)
	}
	s.checkTarget()
}

// verifierFor returns the verifier of a connection, creating it on the
// connection's first message (data may arrive before the connection event).
func (s *sink) verifierFor(id uint64) *testpattern.Checker {
	v := s.conns[id]
	if v == nil {
		v = &testpattern.Checker{Pattern: s.pat}
		s.conns[id] = v
	}
	return v
}

// checkTarget closes reached once messages and lost messages add up to the
// target.
func (s *sink) checkTarget() {
	if s.target > 0 && !s.hit && s.messages.Load()+s.receiveErrors.Load() >= s.target {
		s.hit = true
		close(s.reached)
	}
}

func (s *sink) onEstablished(*endpoint.ReceiveEndpoint) {
	s.accepted.Add(1)
	s.open.Add(1)
}

func (s *sink) onClosed(ep *endpoint.ReceiveEndpoint, _ error) {
	delete(s.conns, ep.ID())
	s.open.Add(-1)
	select {
	case s.closed <- struct{}{}:
	default:
	}
}

// firstAt and lastAt return when the first and the last message arrived
// (the zero time if none did).
func (s *sink) firstAt() time.Time { return s.at(s.first.Load()) }
func (s *sink) lastAt() time.Time  { return s.at(s.last.Load()) }

func (s *sink) at(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return s.base.Add(time.Duration(v - 1))
}

// report summarises what the sink received, timed from the first to the
// last message.
func (s *sink) report(provider string) report {
	r := report{
		Role: "server", Provider: provider, Connections: s.accepted.Load(),
		Messages: s.messages.Load(), Bytes: s.bytes.Load(), Verify: s.pat != nil || s.unordered != nil,
		VerifyErrors: s.verifyErrors.Load(), ReceiveErrors: s.receiveErrors.Load(),
	}
	var elapsed time.Duration
	if first := s.firstAt(); !first.IsZero() {
		elapsed = s.lastAt().Sub(first)
	}
	r.setRates(elapsed)
	return r
}
