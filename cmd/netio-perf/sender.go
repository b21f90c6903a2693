package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/sendbuf"
)

// waitBackoff bounds every wait of the sending goroutine, so that it looks
// again even if no completion signals it (a transmit queue that was full
// for another reason than our own sends, or --inject refused at
// SendConfig.MaxInjectsHeld, which no completion ends).
const waitBackoff = time.Millisecond

// sender streams messages of one size through a buffered send endpoint,
// keeping up to the endpoint's buffer count in flight. Its run and drain
// methods belong to one goroutine; its callbacks run on the endpoint's
// poller goroutine and never block.
//
// When the window is full the sending goroutine sleeps until the messages
// in flight have dropped to a low-water mark (a quarter of the window gone),
// not until the next completion: waking a goroutine costs microseconds, so
// it should come back to refill many buffers, not one.
type sender struct {
	ep       *endpoint.SendEndpointBuffered
	to       bufferSender                   // set instead of ep for --endpoint rdm: one peer of an rdm.Endpoint
	zc       *endpoint.SendEndpointZeroCopy // set instead of ep for --zero-copy
	window   []byte                         // zero-copy: one message slot per buffer, the declared region
	slots    chan int                       // zero-copy: window slots not in flight
	size     int
	pat      *testpattern.Pattern // nil: buffers are sent as they are, not filled
	lowWater uint64               // wake the sender when at most this many are in flight
	inject   bool                 // --inject: endpoint.SendConfig.Inject
	refill   *rdmRefill           // --endpoint rdm client: completions refill the window (rdmrefill.go)

	sent  atomic.Uint64 // messages posted; written by the sending goroutine, and by the rdm refill on the poller goroutine (rdmrefill.go: claim)
	freed chan struct{} // capacity 1: in-flight messages reached lowWater
	waits uint64        // how often the sending goroutine waited (wait, waitSignal); its own
	timer *time.Timer

	completed, failed atomic.Uint64

	goneOnce sync.Once
	gone     chan struct{} // closed when the connection has ended
	goneErr  error         // why; written before gone is closed
}

// bufferSender is what the sender streams through: a buffered send
// endpoint, or one peer of a connectionless endpoint (rdmPeer).
type bufferSender interface {
	GetBuffer() *sendbuf.NetworkBuffer
	SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status
	ReleaseBuffer(id uint64) (uint64, netio.Status)
}

// buffered returns the endpoint the buffered path sends through.
func (s *sender) buffered() bufferSender {
	if s.to != nil {
		return s.to
	}
	return s.ep
}

// newSender returns a sender for messages of size bytes; with pat non-nil
// message k carries the pattern of message k. Dial with its config, then
// attach the endpoint.
func newSender(size int, pat *testpattern.Pattern) *sender {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &sender{size: size, pat: pat, freed: make(chan struct{}, 1), gone: make(chan struct{}), timer: t}
}

// config returns the endpoint configuration: bufs buffers of the message
// size, its own poller configured by pc, completions and connection loss
// routed to the sender.
func (s *sender) config(bufs int, pc cq.Config) endpoint.SendConfig {
	s.setWindow(bufs)
	return endpoint.SendConfig{
		Params:             netio.BufferedSendParams{BufferSize: s.size, BufferCount: bufs},
		OnSendCompleted:    s.onCompleted,
		OnConnectionClosed: s.onClosed,
		Inject:             s.inject,
		Runtime:            cq.Runtime{PollerConfig: pc},
	}
}

// dial connects the sender with bufs messages in flight at most: through
// send buffers (a copy per message), or with zeroCopy straight from a
// window of its own memory declared as the endpoint's region. It returns
// the endpoint's Close.
func (s *sender) dial(ctx context.Context, mgr *domain.Manager, addr string, bufs int, pc cq.Config, zeroCopy bool) (func() error, error) {
	if !zeroCopy {
		ep, err := endpoint.Dial(ctx, mgr, addr, s.config(bufs, pc))
		if err != nil {
			return nil, err
		}
		s.ep = ep
		return ep.Close, nil
	}
	s.setWindow(bufs)
	s.window = make([]byte, bufs*max(s.size, 1))
	s.slots = make(chan int, bufs)
	for i := range bufs {
		s.slots <- i
	}
	zc, err := endpoint.DialZeroCopy(ctx, mgr, addr, endpoint.ZeroCopyConfig{
		HeaderCount: bufs,
		Region:      s.window,
		OnSendCompleted: func(key uint64, st netio.Status) {
			s.slots <- int(key) // never blocks: one entry per slot
			s.onCompleted(key, st)
		},
		OnConnectionClosed: s.onClosed,
		Runtime:            cq.Runtime{PollerConfig: pc},
	})
	if err != nil {
		return nil, err
	}
	s.zc = zc
	return zc.Close, nil
}

// setWindow sets the low-water mark for a window of bufs messages.
func (s *sender) setWindow(bufs int) { s.lowWater = uint64(bufs - max(1, bufs/4)) }

// onCompleted counts a completion and wakes the sending goroutine when the
// messages in flight have dropped to the low-water mark. It runs on the
// poller goroutine and does not block.
func (s *sender) onCompleted(_ uint64, st netio.Status) {
	s.count(st)
	s.signalAtLowWater()
}

// count counts a completion with status st.
func (s *sender) count(st netio.Status) {
	if st == netio.OK {
		s.completed.Add(1)
	} else {
		s.failed.Add(1)
	}
}

// signalAtLowWater wakes the sending goroutine when the messages in
// flight have dropped to the low-water mark.
func (s *sender) signalAtLowWater() {
	if s.sent.Load()-s.done() <= s.lowWater {
		s.signal()
	}
}

// signal wakes the sending goroutine's wait. It does not block.
func (s *sender) signal() {
	select {
	case s.freed <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// onClosed records that the connection ended. It runs on the poller
// goroutine.
func (s *sender) onClosed(err error) {
	s.goneOnce.Do(func() {
		s.goneErr = err
		close(s.gone)
	})
}

// stagedLinger bounds how long a client on a provider that completes sends
// once staged waits for the receiver to close first.
const stagedLinger = 2 * time.Second

// lingerIfStaged waits, on a provider whose sends complete once staged
// (sockets), until the receiver closes the connection, stagedLinger passes
// or ctx ends: closing first would discard what the provider still stages,
// and a receiver that is behind would miss messages reported sent. On
// other providers a completed send has left the provider, and it returns
// at once.
func (s *sender) lingerIfStaged(ctx context.Context, provider string) {
	if !quirks.For(provider).CompletesWhenStaged {
		return
	}
	t := time.NewTimer(stagedLinger)
	defer t.Stop()
	select {
	case <-s.gone:
	case <-t.C:
	case <-ctx.Done():
	}
}

// done returns how many sends have completed, successfully or not.
func (s *sender) done() uint64 { return s.completed.Load() + s.failed.Load() }

// run sends messages until count were posted, the deadline (if not zero)
// passed, the context ended or the connection failed. It returns how many
// it posted in total.
func (s *sender) run(ctx context.Context, count uint64, deadline time.Time) (uint64, error) {
	for k := s.sent.Load(); k < count; k = s.sent.Load() {
		if k%64 == 0 && !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		if s.zc != nil {
			if err := s.postZeroCopy(ctx, k); err != nil {
				return k, err
			}
			continue
		}
		out := s.buffered()
		buf := out.GetBuffer()
		if buf == nil {
			if err := s.wait(ctx); err != nil {
				return k, err
			}
			continue
		}
		if s.pat != nil {
			s.pat.Fill(buf.Bytes()[:s.size], 0, k)
		}
		if err := s.post(ctx, out, buf); err != nil {
			out.ReleaseBuffer(buf.ID())
			return k, err
		}
	}
	return s.sent.Load(), nil
}

// post sends buf until the endpoint accepts it, waiting for a completion
// whenever the transmit queue is full, and counts it as sent. The count
// goes up before the send, so that its completion never sees more
// completed than sent.
func (s *sender) post(ctx context.Context, out bufferSender, buf *sendbuf.NetworkBuffer) error {
	for {
		s.sent.Add(1)
		st := out.SendBuffer(buf, s.size)
		if st == netio.OK {
			return nil
		}
		s.sent.Add(^uint64(0))
		switch st {
		case netio.NoResources:
			if err := s.wait(ctx); err != nil {
				return err
			}
		default:
			return s.sendError(s.sent.Load(), buf.ID(), st)
		}
	}
}

// sendError describes the send of message k from buffer id that failed
// for good with st: for Closed, why the connection ended.
func (s *sender) sendError(k, id uint64, st netio.Status) error {
	if st == netio.Closed {
		return fmt.Errorf("send of message %d: %w", k, s.closedErr())
	}
	return fmt.Errorf("send of message %d (buffer %d): %w", k, id, st.Err())
}

// postZeroCopy sends message k from a free window slot, or waits for a
// completion when none is free.
func (s *sender) postZeroCopy(ctx context.Context, k uint64) error {
	var slot int
	select {
	case slot = <-s.slots:
	default:
		return s.wait(ctx)
	}
	data := s.window[slot*s.size : (slot+1)*s.size]
	if s.pat != nil {
		s.pat.Fill(data, 0, k)
	}
	for {
		s.sent.Add(1)
		st := s.zc.Send(nil, data, uint64(slot))
		if st == netio.OK {
			return nil
		}
		s.sent.Add(^uint64(0))
		if st != netio.NoResources {
			s.slots <- slot
			if st == netio.Closed {
				return fmt.Errorf("send of message %d: %w", k, s.closedErr())
			}
			return fmt.Errorf("send of message %d: %w", k, st.Err())
		}
		if err := s.wait(ctx); err != nil {
			s.slots <- slot
			return err
		}
	}
}

// wait blocks until a completion returned a buffer, waitBackoff passed, the
// connection ended or the context ended.
func (s *sender) wait(ctx context.Context) error {
	s.waits++
	s.timer.Reset(waitBackoff)
	defer s.timer.Stop()
	select {
	case <-s.freed:
	case <-s.timer.C:
	case <-s.gone:
		return s.closedErr()
	case <-ctx.Done():
		return fmt.Errorf("after %d messages: %w", s.sent.Load(), context.Cause(ctx))
	}
	return nil
}

// waitSignal blocks until signal, the connection ended or the context
// ended, with no timer: for a caller that knows a completion will signal.
func (s *sender) waitSignal(ctx context.Context) error {
	s.waits++
	select {
	case <-s.freed:
	case <-s.gone:
		return s.closedErr()
	case <-ctx.Done():
		return fmt.Errorf("after %d messages: %w", s.sent.Load(), context.Cause(ctx))
	}
	return nil
}

// closedErr returns why the connection ended.
func (s *sender) closedErr() error {
	select {
	case <-s.gone:
		return fmt.Errorf("connection closed: %w", s.goneErr)
	default:
		return fmt.Errorf("connection closed")
	}
}

// drain waits until every posted message has completed, then reports the
// sends that failed.
func (s *sender) drain(ctx context.Context) error {
	sent := s.sent.Load()
	for s.done() < sent {
		if err := s.wait(ctx); err != nil {
			if s.done() < sent {
				return fmt.Errorf("%d of %d sends still pending: %w", sent-s.done(), sent, err)
			}
			break // the teardown reported every send before closing
		}
	}
	if f := s.failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d sends failed", f, sent)
	}
	return nil
}
