package main

import (
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

// subTally counts what netio-perf subscribe received, for its report and
// to stop at --count. Its callbacks run on the subscriber's poller
// goroutine, which owns got, gone and stamps; the rest is read from the
// main goroutine.
//
// The clock is read at the first message, once per buffer after it
// (onBuffer) and when --count is reached, never per message: at 64 B a
// read per message took half the subscriber's CPU. The messages are
// counted in got, a plain variable, and published to received once per
// buffer: atomics per message were 15% of a subscriber's CPU. Without
// --verify and --stall-after the message callback only counts (count):
// --count is then checked once per buffer, and the run stops at the end
// of the buffer that reached it, which is the last one when the publisher
// sends --count messages.
type subTally struct {
	count  uint64                // --count (0: none)
	pat    *testpattern.Pattern  // --verify: the pattern to check; nil: none
	stall  func(received uint64) // --stall-after; nil: none
	got    uint64                // messages received (poller goroutine)
	gone   uint64                // messages reported missed (poller goroutine)
	stamps uint64                // got when last was stamped (poller goroutine)

	received, missed, verifyErrors atomic.Uint64
	first, last                    atomic.Int64 // UnixNano of the first message and the last buffer
	reached                        chan struct{}
	reachedOnce                    atomic.Bool
}

// newSubTally returns a tally that closes reached once count messages
// were received or missed (never when count is 0).
func newSubTally(count uint64, pat *testpattern.Pattern, stall func(uint64)) *subTally {
	return &subTally{count: count, pat: pat, stall: stall, reached: make(chan struct{})}
}

// onMessage returns the message callback: a counter alone, or with
// --verify and --stall-after the checks of every message and of --count
// at the message that reaches it.
func (t *subTally) onMessage() func(pubsub.Message) {
	if t.pat == nil && t.stall == nil {
		return t.countMessage
	}
	return t.checkMessage
}

// countMessage counts a message. It is small enough to be inlined into
// the method value onMessage returns, so that a message costs the
// subscriber one call, not two; the first message's clock read is apart.
func (t *subTally) countMessage(pubsub.Message) {
	if t.got == 0 {
		t.stampFirst()
	}
	t.got++
}

// stampFirst records the time of the first message.
func (t *subTally) stampFirst() {
	t.first.CompareAndSwap(0, time.Now().UnixNano())
}

// checkMessage counts a message, verifies it (--verify), stalls at
// --stall-after, and checks --count.
func (t *subTally) checkMessage(m pubsub.Message) {
	t.countMessage(m)
	if t.pat != nil && t.pat.Check(m.Data, m.Tag, m.Seq) != nil {
		t.verifyErrors.Add(1)
	}
	if t.stall != nil {
		t.stall(t.got)
	}
	if t.count > 0 && t.got+t.gone >= t.count {
		t.received.Store(t.got)
		t.check()
	}
}

// onBuffer publishes the count and stamps the time after every buffer.
func (t *subTally) onBuffer(string, []byte) {
	t.received.Store(t.got)
	if t.got != t.stamps && !t.reachedOnce.Load() {
		t.stamps = t.got
		t.last.Store(time.Now().UnixNano())
	}
	t.check()
}

// onGap counts messages reported missed.
func (t *subTally) onGap(g pubsub.Gap) {
	t.gone += g.Count
	t.received.Store(t.got)
	t.missed.Add(g.Count)
	t.check()
}

// check closes reached, once, when --count messages were received or
// missed, and stamps the time.
func (t *subTally) check() {
	if t.count > 0 && t.received.Load()+t.missed.Load() >= t.count && t.reachedOnce.CompareAndSwap(false, true) {
		t.last.Store(time.Now().UnixNano())
		close(t.reached)
	}
}

// elapsed returns the time from the first message to the last buffer (or
// to --count), 0 when there is none.
func (t *subTally) elapsed() time.Duration {
	if f, l := t.first.Load(), t.last.Load(); l > f {
		return time.Duration(l - f)
	}
	return 0
}
