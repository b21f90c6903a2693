package poll

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runtime this package is built with has the metric the probe reads:
// without it the probe answers true at every yield and gates nothing.
func TestRunnableMetricExists(t *testing.T) {
	for _, d := range metrics.All() {
		if d.Name == runnableMetric {
			assert.Equal(t, metrics.KindUint64, d.Kind)
			return
		}
	}
	t.Fatalf("runtime/metrics has no %s", runnableMetric)
}

// The probe says a goroutine waits for a P while more goroutines want to
// run than there are Ps, and that none does once they are all parked. It
// does not allocate.
func TestRunnableProbe(t *testing.T) {
	r := newRunnableProbe()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for !stop.Load() {
				runtime.Gosched()
			}
		})
	}
	busy := waitFor(func() bool { return r.waiting() })
	stop.Store(true)
	wg.Wait()
	require.True(t, busy, "a goroutine waiting while %d spin on %d Ps", 4*runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0))
	assert.True(t, waitFor(func() bool { return !r.waiting() }), "none waiting once they ended")
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.waiting() }))
}

// A probe of a runtime that lacks the metric answers true: the poller then
// yields its P at every yield, as it did before it asked.
func TestRunnableProbeWithoutTheMetric(t *testing.T) {
	r := &runnableProbe{s: [1]metrics.Sample{{Name: "/sched/no-such-metric:goroutines"}}}
	assert.True(t, r.waiting())
}

// waitFor polls cond for up to 10 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
