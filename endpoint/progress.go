package endpoint

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/sendcore"
)

// requestDeliveryComplete asks for delivery-complete sends on the endpoint
// info will open, or says that the provider would not honour it.
func requestDeliveryComplete(info *fabric.Info) error {
	if prov := info.Provider(); !quirks.For(prov).DeliveryComplete {
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

// watchIdle ends the connection when no message has arrived for timeout
// (ListenConfig.IdleTimeout).
func (r *ReceiveEndpoint) watchIdle(timeout time.Duration) {
	activity := func() (bool, uint64) { return true, r.messages.Load() + r.errors.Load() }
	ended := func() bool { return r.state.Load() == stateClosed }
	r.idle = sendcore.StallWatch(timeout, activity, ended, func() {
		reason := fmt.Errorf("%w: %w: no message for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		r.l.log.Warn().Uint64("conn", r.id).Dur("timeout", timeout).Msg("receive idle timeout: closing the connection")
		r.l.poller.Do(func() { r.teardown(reason) })
	})
}
