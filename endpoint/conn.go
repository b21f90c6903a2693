package endpoint

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// infoFor describes host:port in mgr's fabric and domain, with caps: the
// local address to listen on with source, the peer to connect to without.
//
// The caps an endpoint asks for are not only local: a connection request
// may carry the connecting endpoint's caps, and the listener reject it
// (ECONNREFUSED at the dialer) unless they are a subset of its own
// (quirks.Quirks.CapsInConnReq, sockets). A listener therefore asks for all
// the domain has (mgr.Caps), and a dial for what its endpoint uses (see
// connOptions.rma), so that a plain FI_MSG peer accepts a message sender.
func infoFor(mgr *domain.Manager, host, port string, source bool, caps uint64) (*fabric.Info, error) {
	return fabric.GetInfo(fabric.Hints{Provider: mgr.Provider(), Node: host, Service: port, Source: source,
		Fabric: mgr.Info().FabricName(), Domain: mgr.Info().DomainName(), Caps: caps})
}

// openEndpoint opens an endpoint for info whose events reach owner, binds it
// to the poller's queues and enables it. A non-nil endpoint comes back even
// with an error, for the caller to close.
func openEndpoint(mgr *domain.Manager, p *poll.Poller, info *fabric.Info, owner poll.Owner) (*fabric.Endpoint, error) {
	return openCounted(mgr, p, info, owner, nil)
}

// openCounted is openEndpoint with the sends counted by cntr, when it is
// not nil: its sends then complete only when they ask to
// (fabric.BindSelective), and cntr counts every one the provider has sent
// (see sendcore.Core.ConfirmInjects).
func openCounted(mgr *domain.Manager, p *poll.Poller, info *fabric.Info, owner poll.Owner, cntr *fabric.Counter) (*fabric.Endpoint, error) {
	ep, err := mgr.Domain().OpenEndpoint(info, owner.EndpointContext())
	if err != nil {
		return nil, err
	}
	if err = ep.BindEQ(p.EQ()); err != nil {
		return ep, err
	}
	if cntr == nil {
		err = ep.BindCQ(p.CQ(), fabric.BindTransmit|fabric.BindRecv)
	} else if err = ep.BindCQ(p.CQ(), fabric.BindTransmit|fabric.BindSelective); err == nil {
		if err = ep.BindCQ(p.CQ(), fabric.BindRecv); err == nil {
			err = ep.BindCounter(cntr)
		}
	}
	if err != nil {
		return ep, err
	}
	return ep, ep.Enable()
}

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
