package poll

import (
	"runtime"
	"time"
)

// A goroutine locked to its thread (Config.LockOSThread) that never goes
// through the Go scheduler keeps its P on one scheduling tick. The
// runtime's monitor (sysmon) preempts such a goroutine once it has run
// 10 ms on one tick (a signal, tgkill), and when it is in C at that moment
// (a spinning poller mostly is: ReadSpin, the provider's reads) takes its
// P away, which counts as work done and resets the monitor to its
// shortest sleep: it then wakes every 20 µs (with the kernel's timer
// slack, about every 70 µs), doubling only after 50 idle ticks. Each is a
// wake-up of a thread on a busy core (docs/performance.md, "A locked
// poller passes through the scheduler").
//
// So a locked poller passes through the scheduler itself, with one
// runtime.Gosched, when schedPassEvery has gone by since its last pass:
// the scheduling tick moves before the monitor's 10 ms are up, the
// monitor finds nothing to take, and its sleeps lengthen. A locked
// goroutine's Gosched hands its thread over (two thread wake-ups), so the
// period is as long as the 10 ms allow with
// a margin for a late clock check: about 125 passes a second.
const schedPassEvery = 8 * time.Millisecond

// schedPassCheck is how many loop rounds pass between two clock reads of a
// locked poller for schedPassEvery: a round lasts from about a
// microsecond (a small batch) to spinSlice, so the clock is read at most
// about every 64 µs and a pass comes at most about 640 µs late.
const schedPassCheck = 64

// schedPass decides when a locked poller passes through the scheduler.
// It belongs to the poller goroutine.
type schedPass struct {
	now  func() time.Time
	last time.Time
}

// round is called before every loop round iter; it calls runtime.Gosched
// once schedPassEvery has gone by since the last pass, and says whether it
// did.
func (s *schedPass) round(iter uint) bool {
	if iter%schedPassCheck != 0 {
		return false
	}
	now := s.now()
	if now.Sub(s.last) < schedPassEvery {
		return false
	}
	s.last = now
	runtime.Gosched()
	return true
}
