package main

import (
	"context"
	"sync/atomic"

	"github.com/netio-go/netio"
)

// rdmRefill sends the rdm client's --count messages from its completion
// callback: each completion posts the next messages at once, on the poller
// goroutine, where rdm posts a send without handing it over (rdm/poller.go),
// the way the C peer refills its window from its completion loop. The
// sending goroutine posts the first window, then sleeps until the callback
// hands it something: a post the provider refused for now (the goroutine's
// post queues it, and rdm retries it on the next completion), a post that
// failed for good, or the window's low-water mark at the end of the stream.
// So in steady state the client is one busy goroutine and wakes no other:
// a sending goroutine woken at the low-water mark cost the client markedly
// more CPU per 4 KiB message than the C sender, in the Go runtime's
// hand-offs (docs/performance.md, "rdm `tcp;ofi_rxm` 4 KiB and 64 KiB: what a run's
// scheduling shows", and "rdm `tcp;ofi_rxm` 4 KiB: the client as one busy
// goroutine").
type rdmRefill struct {
	s     *sender
	count atomic.Uint64         // messages to send in all; 0: not started
	err   atomic.Pointer[error] // the first post that failed for good
}

// rdmRefillMax is the largest message the rdm client sends by refilling
// from its completions: ofi_rxm's default eager size (FI_OFI_RXM_BUFFER_SIZE,
// 16 KiB), below which a message costs a few microseconds of CPU and the
// Go runtime's hand-offs around a sending goroutine are a large part of
// it. A larger message (a rendezvous) costs tens of microseconds, where a
// goroutine woken once per quarter window is lost in the noise, and the
// refill measured no faster there (docs/performance.md, "the client as one
// busy goroutine"); those sizes keep the sending goroutine.
const rdmRefillMax = 16 << 10

// refills reports whether the rdm client o sends by refilling from its
// completions: buffered sends of at most rdmRefillMax bytes.
func refills(o clientOptions) bool { return !o.inject && o.size <= rdmRefillMax }

// refillResult is what one refill post did.
type refillResult uint8

const (
	refillPosted  refillResult = iota // posted the next message
	refillIdle                        // nothing to post: no buffer free, or every message claimed
	refillRefused                     // the endpoint refused it for now (NoResources)
	refillFailed                      // the post failed for good (recorded in err)
)

// rdmCompletion returns the completion callback of the sender's rdm
// endpoint: the refill's when it has one.
func (s *sender) rdmCompletion() func(uint64, netio.Status) {
	if s.refill != nil {
		return s.refill.onCompleted
	}
	return s.onCompleted
}

// onCompleted counts a completion, then refills the window; a post it
// could not make goes to the sending goroutine, and so does the low-water
// mark, which the window reaches only once every message was claimed. It
// runs on the poller goroutine and does not block.
func (r *rdmRefill) onCompleted(_ uint64, st netio.Status) {
	r.s.count(st)
	res := r.post()
	for res == refillPosted {
		res = r.post()
	}
	if res != refillIdle {
		r.s.signal()
		return
	}
	r.s.signalAtLowWater()
}

// post sends the next message if one is left and a buffer is free.
func (r *rdmRefill) post() refillResult {
	out := r.s.buffered()
	buf := out.GetBuffer()
	if buf == nil {
		return refillIdle
	}
	k, ok := r.claim()
	if !ok {
		out.ReleaseBuffer(buf.ID())
		return refillIdle
	}
	if r.s.pat != nil {
		r.s.pat.Fill(buf.Bytes()[:r.s.size], 0, k)
	}
	st := out.SendBuffer(buf, r.s.size)
	if st == netio.OK {
		return refillPosted
	}
	r.s.sent.Add(^uint64(0))
	out.ReleaseBuffer(buf.ID())
	if st == netio.NoResources {
		return refillRefused
	}
	err := r.s.sendError(k, buf.ID(), st)
	r.err.CompareAndSwap(nil, &err)
	return refillFailed
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
// were posted, a post failed or the context ended. When it finds no buffer
// free with messages in flight it waits for the callback's signal alone
// (each completion either refills or signals); after a post refused for
// now it retries after waitBackoff at the latest.
func (r *rdmRefill) run(ctx context.Context, count uint64) error {
	r.count.Store(count)
	for r.s.sent.Load() < count {
		if e := r.err.Load(); e != nil {
			return *e
		}
		res := r.post()
		if res == refillPosted {
			continue
		}
		if e := r.err.Load(); e != nil {
			return *e
		}
		var err error
		if res == refillIdle && r.s.sent.Load() > r.s.done() {
			err = r.s.waitSignal(ctx)
		} else {
			err = r.s.wait(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
