package poll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestHistogramBuckets(t *testing.T) {
	var h histogram
	for _, d := range []time.Duration{0, time.Microsecond, time.Microsecond + 1, 4 * time.Microsecond,
		time.Millisecond, 65536 * time.Microsecond, time.Second} {
		h.observe(d)
	}
	r := h.read()
	want := [len(CallbackBounds) + 1]uint64{2, 2, 0, 0, 0, 1, 0, 0, 1, 1}
	assert.Equal(t, want, r.Counts, "a duration counts in the first bucket whose bound it does not exceed")
	assert.Equal(t, uint64(7), r.Count)
	assert.Equal(t, time.Second+65536*time.Microsecond+time.Millisecond+6*time.Microsecond+1, r.Sum)
}

// BenchmarkCallbackClock is what the callback-time histogram adds to each
// batch of completions the poller delivers, sampled: a count, and one
// batch in CallbackSample two clock reads and an observation. The
// "timed" case is the cost of a timed batch. Neither allocates.
func BenchmarkCallbackClock(b *testing.B) {
	b.Run("amortized", func(b *testing.B) {
		var p Poller
		b.ReportAllocs()
		for b.Loop() {
			p.batchEnd(p.batchStart())
		}
	})
	b.Run("timed", func(b *testing.B) {
		var h histogram
		b.ReportAllocs()
		for b.Loop() {
			start := since()
			h.observe(since() - start)
		}
	})
}

func TestCallbackSampling(t *testing.T) {
	var p Poller
	for range 10 * CallbackSample {
		p.batchEnd(p.batchStart())
	}
	assert.Equal(t, uint64(10), p.callbacks.read().Count, "one batch in CallbackSample timed")
}
