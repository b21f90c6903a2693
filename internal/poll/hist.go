package poll

import (
	"sync/atomic"
	"time"
)

// CallbackBounds are the upper bounds of the buckets of the callback-time
// histogram (Poller.CallbackTime): powers of four from 1 µs to 65 ms, the
// range between a callback that only counts and one that blocks.
var CallbackBounds = [...]time.Duration{
	1 * time.Microsecond, 4 * time.Microsecond, 16 * time.Microsecond, 64 * time.Microsecond,
	256 * time.Microsecond, 1024 * time.Microsecond, 4096 * time.Microsecond,
	16384 * time.Microsecond, 65536 * time.Microsecond,
}

// histogram counts durations in the fixed buckets of CallbackBounds. The
// poller goroutine is its only writer; readers load the atomics at any
// time, so observing costs two atomic adds and no lock or allocation.
type histogram struct {
	counts [len(CallbackBounds) + 1]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

// observe counts d.
func (h *histogram) observe(d time.Duration) {
	i := 0
	for i < len(CallbackBounds) && d > CallbackBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Histogram is a reading of the callback-time histogram: Counts[i] is the
// number of batches that took at most CallbackBounds[i] (and more than the
// bound before); the last entry counts those above every bound.
type Histogram struct {
	Counts [len(CallbackBounds) + 1]uint64
	Count  uint64
	Sum    time.Duration
}

func (h *histogram) read() Histogram {
	var out Histogram
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
		out.Count += out.Counts[i]
	}
	out.Sum = time.Duration(h.sum.Load())
	return out
}

// CallbackSample is how many batches of completions pass per batch the
// callback-time histogram times: two clock reads cost about as much as
// delivering a small completion (BenchmarkCallbackClock), so timing every
// batch would tax the hot path; one in 16 costs a few nanoseconds a batch
// and still gives the distribution.
const CallbackSample = 16

// batchStart begins timing a batch of completions, one batch in
// CallbackSample; it returns -1 for a batch not timed. Poller goroutine
// only.
func (p *Poller) batchStart() time.Duration {
	if p.batches++; p.batches%CallbackSample != 0 {
		return -1
	}
	return since()
}

// batchEnd counts the time of a batch batchStart timed.
func (p *Poller) batchEnd(start time.Duration) {
	if start >= 0 {
		p.callbacks.observe(since() - start)
	}
}

// clockBase is the origin of since: time.Since of a time with a monotonic
// reading costs one clock read, where time.Now costs two.
var clockBase = time.Now()

// since returns the monotonic time since clockBase.
func since() time.Duration { return time.Since(clockBase) }
