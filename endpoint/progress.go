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

// watchProgress ends the connection when operations stay pending without
// one finishing for timeout. It checks every quarter of the timeout, so a
// stall is noticed after between timeout and 1.25 × timeout; the hot path
// pays nothing, because the check reads the counters the endpoint keeps
// anyway.
func (c *sendConn) watchProgress(timeout time.Duration) {
	tick := max(timeout/4, time.Millisecond)
	var last uint64
	var stalled time.Duration
	var t *time.Timer
	t = time.AfterFunc(time.Hour, func() { // armed below, once stored
		if c.ended.Load() {
			return
		}
		pending, finished := c.kind.progress()
		if !pending || finished != last {
			last, stalled = finished, 0
		} else if stalled += tick; stalled >= timeout {
			reason := fmt.Errorf("%w: %w: no send completed for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
			c.log.Warn().Str("peer", c.addr).Dur("timeout", timeout).Msg("send progress timeout: closing the connection")
			c.poller.Do(func() { c.teardown(reason) })
			return
		}
		t.Reset(tick)
	})
	c.watchdog.Store(t)
	t.Reset(tick)
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
