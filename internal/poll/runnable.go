package poll

import "runtime/metrics"

// An unlocked poller's yield calls runtime.Gosched so that a goroutine
// waiting for a P gets this one: one its callbacks readied (it sits in
// this P's run queue), or, when pollers hold every P, any other. With
// nothing waiting, the Gosched only costs: Go 1.26's goschedImpl puts the
// poller on the global run queue and, with a P idle, wakes an idle thread
// (wakep), which either finds nothing and parks again (a futex wake and
// two context switches, on a core the peer process needs) or takes the
// poller goroutine, which then runs on another thread. An rdm sender that
// posts from its completion callbacks (one busy goroutine, as a C sender)
// paid 0.0017 such wake-ups a 4 KiB message, each preempting a thread, and
// a poller that moved between its threads (docs/performance.md, "rdm
// `tcp;ofi_rxm` 4 KiB: the client as one busy goroutine"). So the poller
// asks the runtime first whether any goroutine is ready to run and waits
// for a P, and passes by the Gosched when none is.

// runnableMetric is the runtime's count of goroutines ready to run but not
// running: every P's run queue and the global one, read under the
// scheduler's lock (Go 1.26's runtime/metrics; about 60 ns, no
// allocation).
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// runnableProbe reads runnableMetric. It belongs to the poller goroutine.
type runnableProbe struct {
	s [1]metrics.Sample
}

func newRunnableProbe() *runnableProbe {
	return &runnableProbe{s: [1]metrics.Sample{{Name: runnableMetric}}}
}

// waiting reports whether a goroutine is ready to run and not running. A
// runtime without the metric reports true: the poller then yields its P
// at every yield, as before the probe.
func (r *runnableProbe) waiting() bool {
	metrics.Read(r.s[:])
	v := r.s[0].Value
	return v.Kind() != metrics.KindUint64 || v.Uint64() > 0
}
