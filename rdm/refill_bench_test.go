package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/cputime"
	"github.com/netio-go/netio/rdm"
)

// BenchmarkSendBufferShapes streams 4 KiB messages to a peer of the same
// domain in the two shapes a sending program takes: "goroutine", whose
// sending goroutine refills the 64-buffer window when OnSendCompleted
// wakes it at a quarter of the window free, and "refill", whose
// OnSendCompleted posts the next messages itself on the poller goroutine
// (the shape the package doc recommends for small messages; netio-perf's
// rdm client, cmd/netio-perf/rdmrefill.go). Besides ns/op it reports the
// process's CPU time and context switches per message, which load changes
// less than the rate. Steady state allocates nothing in either.
func BenchmarkSendBufferShapes(b *testing.B) {
	const size, window = 4 << 10, 64
	for _, provider := range []string{"tcp;ofi_rxm", "sockets"} {
		for _, refill := range []bool{false, true} {
			name := provider + "/goroutine"
			if refill {
				name = provider + "/refill"
			}
			b.Run(name, func(b *testing.B) {
				s := &shapeSender{total: int64(b.N), lowWater: window - window/4, refill: refill, wake: make(chan struct{}, 1)}
				s.left.Store(int64(b.N))
				var done func()
				s.tx, s.peer, done = benchPair(b, provider, size, rdm.Config{
					Send:            netio.BufferedSendParams{BufferSize: size, BufferCount: window},
					OnSendCompleted: s.onCompleted,
				})
				defer done()
				b.SetBytes(size)
				b.ReportAllocs()
				cpu0, sw0 := cpuTime(b), switches(b)
				b.ResetTimer()
				s.run(b)
				b.StopTimer()
				b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/msg")
				b.ReportMetric(float64(switches(b)-sw0)/float64(b.N), "switches/msg")
			})
		}
	}
}

// shapeSender sends total messages to peer from its own goroutine (run)
// and, with refill, from OnSendCompleted.
type shapeSender struct {
	tx        *rdm.Endpoint
	peer      rdm.Peer
	total     int64
	lowWater  int64        // the goroutine shape's wake-up: this many in flight
	left      atomic.Int64 // messages not claimed by a post yet
	completed atomic.Int64
	refill    bool
	wake      chan struct{} // capacity 1: the goroutine has something to do
}

// post claims a message and posts it. It reports false, giving the claim
// back, when no buffer is free or none is left (refused false), or when
// the endpoint refused the send for now (refused true).
func (s *shapeSender) post() (ok, refused bool) {
	buf := s.tx.GetBuffer()
	if buf == nil {
		return false, false
	}
	if s.left.Add(-1) < 0 {
		s.left.Add(1)
		s.tx.ReleaseBuffer(buf.ID())
		return false, false
	}
	if s.tx.SendBuffer(buf, buf.Size(), s.peer) != netio.OK {
		s.left.Add(1)
		s.tx.ReleaseBuffer(buf.ID())
		return false, true
	}
	return true, false
}

// onCompleted runs on the poller goroutine. The goroutine shape wakes the
// sending goroutine at the low-water mark; the refill shape posts what it
// can and wakes it only for a post refused for now. Both wake it at the
// end.
func (s *shapeSender) onCompleted(uint64, netio.Status) {
	c := s.completed.Add(1)
	wake := c == s.total
	if s.refill {
		ok, refused := s.post()
		for ok {
			ok, refused = s.post()
		}
		wake = wake || refused
	} else {
		wake = wake || s.total-s.left.Load()-c <= s.lowWater
	}
	if wake {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// run posts what it can, then sleeps until woken, until every message has
// completed.
func (s *shapeSender) run(b *testing.B) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for s.completed.Load() < s.total {
		for ok := true; ok; ok, _ = s.post() {
		}
		if s.completed.Load() >= s.total {
			return
		}
		t.Reset(10 * time.Second)
		select {
		case <-s.wake:
		case <-t.C:
			b.Fatalf("not woken for 10 s: %d of %d completed", s.completed.Load(), s.total)
		}
	}
}

// switches returns the process's context switches so far.
func switches(b *testing.B) int64 {
	v, i, err := cputime.Switches()
	if err != nil {
		b.Fatal(err)
	}
	return v + i
}
