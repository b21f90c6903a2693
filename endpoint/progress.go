package endpoint

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// deliveryCompleteProviders are the providers measured to honour
// FI_DELIVERY_COMPLETE on sends in libfabric 1.17: tcp completes a send
// when the peer acknowledges its placement. sockets completes sends as soon
// as it has buffered them, whatever the flag says.
var deliveryCompleteProviders = map[string]bool{"tcp": true}

// requestDeliveryComplete asks for delivery-complete sends on the endpoint
// info will open, or says that the provider would not honour it.
func requestDeliveryComplete(info *fabric.Info) error {
	if prov := info.Provider(); !deliveryCompleteProviders[prov] {
		return fmt.Errorf("%w: endpoint: provider %s does not complete sends on delivery", netio.ErrNotSupported, prov)
	}
	info.SetDeliveryComplete()
	return nil
}

// checkProgressTimeout is the check of SendConfig.ProgressTimeout and
// ZeroCopyConfig.ProgressTimeout.
func checkProgressTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: endpoint: negative ProgressTimeout %v", netio.ErrInvalidArgument, d)
	}
	return nil
}

// stallWatch calls onStall once when progress reports work waiting and an
// unchanged count for timeout, unless ended says the connection is over.
// It checks every quarter of the timeout, so a stall is noticed after
// between timeout and 1.25 × timeout; the hot path pays nothing, because
// progress reads counters the endpoint keeps anyway. Stop the returned
// timer when the connection ends.
func stallWatch(timeout time.Duration, progress func() (waiting bool, count uint64), ended func() bool, onStall func()) *time.Timer {
	tick := max(timeout/4, time.Millisecond)
	var last uint64
	var stalled time.Duration
	var t *time.Timer
	t = time.AfterFunc(time.Hour, func() { // armed below, once assigned
		if ended() {
			return
		}
		waiting, count := progress()
		if !waiting || count != last {
			last, stalled = count, 0
		} else if stalled += tick; stalled >= timeout {
			onStall()
			return
		}
		t.Reset(tick)
	})
	t.Reset(tick)
	return t
}

// watchProgress ends the connection when sends stay pending without one
// finishing for timeout (SendConfig.ProgressTimeout).
func (c *sendConn) watchProgress(timeout time.Duration) {
	c.watchdog.Store(stallWatch(timeout, c.kind.progress, c.ended.Load, func() {
		reason := fmt.Errorf("%w: %w: no send completed for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		c.log.Warn().Str("peer", c.addr).Dur("timeout", timeout).Msg("send progress timeout: closing the connection")
		c.poller.Do(func() { c.teardown(reason) })
	}))
}

// watchIdle ends the connection when no message has arrived for timeout
// (ListenConfig.IdleTimeout).
func (r *ReceiveEndpoint) watchIdle(timeout time.Duration) {
	activity := func() (bool, uint64) { return true, r.messages.Load() + r.errors.Load() }
	ended := func() bool { return r.state.Load() == stateClosed }
	r.idle = stallWatch(timeout, activity, ended, func() {
		reason := fmt.Errorf("%w: %w: no message for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		r.l.log.Warn().Uint64("conn", r.id).Dur("timeout", timeout).Msg("receive idle timeout: closing the connection")
		r.l.poller.Do(func() { r.teardown(reason) })
	})
}

// progress reports the counters ProgressTimeout watches.
func (c *sendCounters) progress() (pending bool, finished uint64) {
	finished = c.completed.Load() + c.failed.Load()
	return c.sent.Load() > finished, finished
}

func (s *SendEndpointBuffered) progress() (bool, uint64) { return s.counters.progress() }
func (z *SendEndpointZeroCopy) progress() (bool, uint64) { return z.counters.progress() }

// RMA transfers are bounded by their contexts, not by ProgressTimeout.
func (rmaKind) progress() (bool, uint64) { return false, 0 }
