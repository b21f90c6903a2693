package endpoint

import (
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/sendcore"
)

// How long a receiving connection keeps delivering after the peer shut
// down. The quiet period must outlast a scheduling gap of the provider's
// progress thread on a loaded machine; docs/performance.md has what a
// shorter one lost.
const (
	drainQuiet = 100 * time.Millisecond // close after this long without a message
	drainMax   = 5 * time.Second        // and in any case after this long
	// drainHeldMax bounds a drain that a peek keeps going: the provider
	// still holds a message but does not deliver it.
	drainHeldMax = 30 * time.Second
)

// drainPeekKey is the completion key of a drain's peek (drainer.confirm),
// apart from buffer indexes and from rmaKeyFlag, rmaLastFlag and
// reverseKeyFlag, so that its completion is never taken for a receive, a
// send or an RMA chunk. Only the connection's handler passes it to
// drainer.peeked.
const drainPeekKey = uint32(1) << 28

// drainer ends a receiving connection after the peer's shutdown without
// losing what the provider already holds (quirks.Quirks.ShutdownBeforeDelivered:
// the shutdown event can come while messages the provider accepted still
// wait for posted buffers). The connection keeps delivering and ends once
// no message has come for drainQuiet, or drainMax after the shutdown, and
// in either case only after its poller has read the completion queue empty
// since that verdict (poll.Poller.CQEmptied): the event queue is read apart
// from the completion queue, so the shutdown can be seen while the
// connection's last messages (on tcp, written before the shutdown) still
// wait in the completion queue behind other connections' completions, and
// a poller kept from running (a loaded machine) sees no message meanwhile.
// Ending then dropped them, reported OK to the sender (tests/storm
// TestConcurrentStreams/tcp under load). On a provider that holds messages
// in a list of its own, delivered by its progress thread only, at times
// seconds later (quirks.Quirks.PeekBuffered: sockets), no quiet period is
// long enough: there the verdict stands only once a peek
// (fabric.Endpoint.Peek) finds no message waiting; while one waits, the
// drain goes on (up to drainHeldMax). Every receiving connection drains
// with it: an accepted one (ReceiveEndpoint) and a dialled one with replies
// (DialReplies). Its methods run on the poller goroutine; the timer hands
// its check to it.
type drainer struct {
	on, peeking bool // draining; a peek's answer is awaited
	start, last time.Time
	timer       *time.Timer
	ended       func() bool
	end         func()
	peek        func() fabric.Errno // nil: the provider is not peeked
}

// drainPoller is what a drain needs of its poller (poll.Poller).
type drainPoller interface {
	sendcore.Emptier
	Do(fn func())
}

// begin starts draining, once: on p's goroutine, end runs once the
// connection is quiet, unless ended reports that it ended meanwhile. peek
// (from drainPeek; nil: none) posts a peek whose completion, with key
// drainPeekKey, the connection's handler passes to peeked.
func (d *drainer) begin(p drainPoller, ended func() bool, end func(), peek func() fabric.Errno) {
	if d.on {
		return
	}
	now := time.Now()
	d.on, d.start, d.last = true, now, now
	d.ended, d.end, d.peek = ended, end, peek
	d.timer = time.AfterFunc(drainQuiet, func() {
		p.Do(func() { d.check(p) })
	})
}

// drainPeek returns post for a provider whose quiet verdict a peek
// confirms (quirks.Quirks.PeekBuffered), nil for the others.
func drainPeek(provider string, post func() fabric.Errno) func() fabric.Errno {
	if !quirks.For(provider).PeekBuffered {
		return nil
	}
	return post
}

// check runs on the poller goroutine when the timer fires: quiet for
// drainQuiet (or drainMax after the shutdown) is a verdict that
// sendcore.AfterEmptied confirms; otherwise the timer waits again.
func (d *drainer) check(p drainPoller) {
	if d.ended() || d.peeking {
		return
	}
	if now := time.Now(); now.Sub(d.last) < drainQuiet && now.Sub(d.start) < drainMax {
		d.timer.Reset(drainQuiet)
		return
	}
	last := d.last
	sendcore.AfterEmptied(p, func(stopped bool) {
		switch {
		case d.ended():
		case stopped: // nothing more comes
			d.end()
		case d.last != last && time.Since(d.start) < drainMax: // a message came: not quiet
			d.timer.Reset(drainQuiet)
		default:
			d.confirm()
		}
	})
}

// confirm ends the quiet connection, or first asks a provider that holds
// messages of its own whether one waits (peeked takes the answer). A peek
// that cannot be posted leaves the time-based verdict standing.
func (d *drainer) confirm() {
	if d.peek == nil || d.peek() != 0 {
		d.end()
		return
	}
	d.peeking = true
}

// peeked takes the answer to confirm's peek on the poller goroutine: no
// message waits (FI_ENOMSG) and the connection ends; one does and the
// drain goes on. The provider answers a peek at once, so a peek is never
// in flight at the close; an answer that comes after it (during the
// close's read-out, or once the owner is gone) is ignored: peeking is over.
func (d *drainer) peeked(res poll.Result) {
	if !d.peeking {
		return
	}
	d.peeking = false
	switch {
	case d.ended():
	case res.Status == netio.OK && time.Since(d.start) < drainHeldMax: // a message waits
		d.timer.Reset(drainQuiet)
	default:
		d.end()
	}
}

// received notes a message delivered, which keeps a drain going.
func (d *drainer) received() {
	if d.on {
		d.last = time.Now()
	}
}

// stop stops the timer once the connection has ended.
func (d *drainer) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}
