package endpoint

import (
	"time"

	"github.com/netio-go/netio/internal/poll"
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
// no message has come for drainQuiet, or drainMax after the shutdown. Every
// receiving connection drains with it: an accepted one (ReceiveEndpoint)
// and a dialled one with replies (DialReplies). Its methods run on the
// poller goroutine; the timer hands its check to it.
type drainer struct {
	on          bool
	start, last time.Time
	timer       *time.Timer
}

// begin starts draining, once: on p's goroutine, end runs once the
// connection is quiet, unless ended reports that it ended meanwhile.
func (d *drainer) begin(p *poll.Poller, ended func() bool, end func()) {
	if d.on {
		return
	}
	now := time.Now()
	d.on, d.start, d.last = true, now, now
	d.timer = time.AfterFunc(drainQuiet, func() {
		p.Do(func() {
			if ended() {
				return
			}
			if now := time.Now(); now.Sub(d.last) >= drainQuiet || now.Sub(d.start) >= drainMax {
				end()
				return
			}
			d.timer.Reset(drainQuiet)
		})
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
