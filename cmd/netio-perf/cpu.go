package main

import (
	"time"

	"github.com/netio-go/netio/internal/cputime"
)

// cpuTime returns the CPU time (user + system, every thread) this process
// has used so far, or 0 if the kernel does not say.
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}

// ctxSwitches returns how many times this process's threads were switched
// off a CPU so far, voluntarily or not (cputime.Switches), or 0 if the
// kernel does not say.
func ctxSwitches() int64 {
	v, i, _ := cputime.Switches()
	return v + i
}

// cpuPerGB returns CPU seconds per GB (10^9 bytes) moved, or 0 when nothing
// moved (never Inf or NaN, which JSON cannot carry).
func cpuPerGB(cpu time.Duration, bytes uint64) float64 {
	if bytes == 0 {
		return 0
	}
	return cpu.Seconds() / (float64(bytes) / 1e9)
}

// setCPU records the CPU time a throughput part took, in total and per GB of
// the row's bytes.
func (r *sweepRow) setCPU(cpu time.Duration) {
	r.CPUSeconds = cpu.Seconds()
	r.CPUSecPerGB = cpuPerGB(cpu, r.Bytes)
}

// meter times a throughput part: wall time from its start to the last
// message the sink received, and the process's CPU time over the same span
// (both sides: sender and receiver run in this process).
type meter struct {
	start time.Time
	cpu0  time.Duration
}

// startMeter starts timing now.
func startMeter() meter { return meter{start: time.Now(), cpu0: cpuTime()} }

// stop fills the row's counters, rates and CPU figures from what the sink
// received. Call it once the sink has every message.
func (m meter) stop(sk *sink, row *sweepRow) {
	cpu := cpuTime() - m.cpu0
	row.Messages, row.Bytes = sk.messages.Load(), sk.bytes.Load()
	elapsed := sk.lastAt().Sub(m.start)
	row.Seconds = elapsed.Seconds()
	row.MBPerS, row.MsgsPerS = rates(row.Messages, row.Bytes, elapsed)
	row.setCPU(cpu)
}
