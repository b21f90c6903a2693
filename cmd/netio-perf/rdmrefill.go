package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/netio-go/netio"
)

// rdmRefill sends the rdm client's --count messages from its completion
// callback as well as from the sending goroutine: each completion posts
// the next messages at once, on the poller goroutine, where rdm posts a
// send without handing it over (rdm/poller.go), the way the C peer refills
// its window from its completion loop. The sending goroutine posts the
// first window and whatever the callback could not (no buffer free, the
// provider still connecting), and waits in between. A sending goroutine
// alone, woken at the window's low-water mark, cost the client 1.3 times
// the C sender's CPU per 4 KiB message in the Go runtime's hand-offs
// (docs/performance.md, "rdm `tcp;ofi_rxm` 4 KiB and 64 KiB: what a run's
// scheduling shows").
type rdmRefill struct {
	s     *sender
	count atomic.Uint64         // messages to send in all; 0: not started
	err   atomic.Pointer[error] // the first post that failed for good
}

// rdmCompletion returns the completion callback of the sender's rdm
// endpoint: the refill's when it has one.
func (s *sender) rdmCompletion() func(uint64, netio.Status) {
	if s.refill != nil {
		return s.refill.onCompleted
	}
	return s.onCompleted
}

// onCompleted counts a completion, then refills the window. It runs on
// the poller goroutine and does not block.
func (r *rdmRefill) onCompleted(key uint64, st netio.Status) {
	r.s.onCompleted(key, st)
	for r.post() == netio.OK {
	}
}

// post sends the next message if one is left and a buffer is free. It
// returns OK when it posted one, NoResources when it could not now, and
// the status of a post that failed for good (recorded for run).
func (r *rdmRefill) post() netio.Status {
	out := r.s.buffered()
	buf := out.GetBuffer()
	if buf == nil {
		return netio.NoResources
	}
	k, ok := r.claim()
	if !ok {
		out.ReleaseBuffer(buf.ID())
		return netio.NoResources
	}
	if r.s.pat != nil {
		r.s.pat.Fill(buf.Bytes()[:r.s.size], 0, k)
	}
	st := out.SendBuffer(buf, r.s.size)
	if st == netio.OK {
		return st
	}
	r.s.sent.Add(^uint64(0))
	out.ReleaseBuffer(buf.ID())
	if st != netio.NoResources {
		err := fmt.Errorf("send of message %d (buffer %d): %w", k, buf.ID(), st.Err())
		if st == netio.Closed {
			err = fmt.Errorf("send of message %d: %w", k, r.s.closedErr())
		}
		r.err.CompareAndSwap(nil, &err)
	}
	return st
}

// claim takes the index of the next message to send, counting it sent,
// unless count were claimed.
func (r *rdmRefill) claim() (uint64, bool) {
	for {
		k := r.s.sent.Load()
		if k >= r.count.Load() {
			return 0, false
		}
		if r.s.sent.CompareAndSwap(k, k+1) {
			return k, true
		}
	}
}

// run sends count messages, posting what the callback does not, until all
// were posted, a post failed or the context ended.
func (r *rdmRefill) run(ctx context.Context, count uint64) error {
	r.count.Store(count)
	for r.s.sent.Load() < count {
		if e := r.err.Load(); e != nil {
			return *e
		}
		if r.post() == netio.OK {
			continue
		}
		if e := r.err.Load(); e != nil {
			return *e
		}
		if err := r.s.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}
