package endpoint

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// closeReason turns a connection event into the error OnConnectionClosed
// receives.
func closeReason(ev fabric.Event) error {
	switch {
	case ev.Kind == fabric.EventShutdown:
		return netio.ErrConnectionClosed
	case ev.Err != nil:
		return fmt.Errorf("%w: %w", netio.ErrConnectionClosed, ev.Err)
	default:
		return fmt.Errorf("%w: unexpected %v event", netio.ErrConnectionClosed, ev.Kind)
	}
}

// connectError turns a failed connection attempt into the error Dial
// returns: refusals match netio.ErrConnectionRefused.
func connectError(addr string, err error) error {
	if errors.Is(err, fabric.ECONNREFUSED) || errors.Is(err, fabric.ECONNABORTED) || errors.Is(err, fabric.ECONNRESET) {
		return fmt.Errorf("endpoint: dial %s: %w: %w", addr, netio.ErrConnectionRefused, err)
	}
	return fmt.Errorf("endpoint: dial %s: %w", addr, err)
}
