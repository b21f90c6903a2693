package endpoint

import (
	"time"

	"github.com/netio-go/netio/internal/sendcore"
)

// How long a receiving connection keeps delivering after the peer shut
// down. The quiet period must outlast a scheduling gap of the provider's
// progress thread on a loaded machine; docs/performance.md has what a
// shorter one lost.
const (
	drainQuiet = 100 * time.Millisecond // close after this long without a message
	drainMax   = 5 * time.Second        // and in any case after this long
)

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
// TestConcurrentStreams/tcp under load). Every receiving connection drains
// with it: an accepted one (ReceiveEndpoint) and a dialled one with replies
// (DialReplies). Its methods run on the poller goroutine; the timer hands
// its check to it.
type drainer struct {
	on          bool
	start, last time.Time
	timer       *time.Timer
}

// drainPoller is what a drain needs of its poller (poll.Poller).
type drainPoller interface {
	sendcore.Emptier
	Do(fn func())
}

// begin starts draining, once: on p's goroutine, end runs once the
// connection is quiet, unless ended reports that it ended meanwhile.
func (d *drainer) begin(p drainPoller, ended func() bool, end func()) {
	if d.on {
		return
	}
	now := time.Now()
	d.on, d.start, d.last = true, now, now
	d.timer = time.AfterFunc(drainQuiet, func() {
		p.Do(func() { d.check(p, ended, end) })
	})
}

// check runs on the poller goroutine when the timer fires: quiet for
// drainQuiet (or drainMax after the shutdown) is a verdict that
// sendcore.AfterEmptied confirms; otherwise the timer waits again.
func (d *drainer) check(p drainPoller, ended func() bool, end func()) {
	if ended() {
		return
	}
	if now := time.Now(); now.Sub(d.last) < drainQuiet && now.Sub(d.start) < drainMax {
		d.timer.Reset(drainQuiet)
		return
	}
	last := d.last
	sendcore.AfterEmptied(p, func(stopped bool) {
		switch {
		case ended():
		case stopped: // nothing more comes
			end()
		case d.last != last && time.Since(d.start) < drainMax: // a message came: not quiet
			d.timer.Reset(drainQuiet)
		default:
			end()
		}
	})
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
