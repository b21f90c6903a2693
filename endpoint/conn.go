package endpoint

import (
	"errors"
	"fmt"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
)

// attachPoller returns the shared poller, or opens one the caller owns (and
// closes) when shared is nil.
func attachPoller(mgr *domain.Manager, shared *cq.Poller, cfg cq.Config) (p *cq.Poller, own bool, err error) {
	if shared != nil {
		return shared, false, nil
	}
	p, err = cq.Open(mgr.Fabric(), mgr.Domain(), cfg)
	return p, err == nil, err
}

// infoFor describes host:port in mgr's fabric and domain, with caps: the
// local address to listen on with source, the peer to connect to without.
//
// The caps an endpoint asks for are not only local: on sockets (libfabric
// 1.17) a connection request carries the connecting endpoint's caps, and
// the listener rejects the request (FI_REJECT, ECONNREFUSED at the dialer)
// unless they are a subset of its own. A listener therefore asks for all
// the domain has (mgr.Caps), and a dial for what its endpoint uses (see
// connOptions.rma), so that a plain FI_MSG peer accepts a message sender.
func infoFor(mgr *domain.Manager, host, port string, source bool, caps uint64) (*fabric.Info, error) {
	return fabric.GetInfo(fabric.Hints{Provider: mgr.Provider(), Node: host, Service: port, Source: source,
		Fabric: mgr.Info().FabricName(), Domain: mgr.Info().DomainName(), Caps: caps})
}

// openEndpoint opens an endpoint for info whose events reach owner, binds it
// to the poller's queues and enables it. A non-nil endpoint comes back even
// with an error, for the caller to close.
func openEndpoint(mgr *domain.Manager, p *cq.Poller, info *fabric.Info, owner cq.Owner) (*fabric.Endpoint, error) {
	ep, err := mgr.Domain().OpenEndpoint(info, owner.EndpointContext())
	if err != nil {
		return nil, err
	}
	if err = ep.BindEQ(p.EQ()); err != nil {
		return ep, err
	}
	if err = ep.BindCQ(p.CQ(), fabric.BindTransmit|fabric.BindRecv); err != nil {
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

// postGuard orders posts on an endpoint against its close: a post holds
// it shared while it calls into libfabric, the close takes it exclusively
// once, and later posts are refused. Every endpoint kind posts through one.
type postGuard struct {
	mu     sync.RWMutex
	ep     *fabric.Endpoint
	closed bool
}

// acquire returns the endpoint and holds off its close until release; ok
// is false once the endpoint is closed (or was never opened).
func (g *postGuard) acquire() (ep *fabric.Endpoint, ok bool) {
	g.mu.RLock()
	if g.closed || g.ep == nil {
		g.mu.RUnlock()
		return nil, false
	}
	return g.ep, true
}

// release ends a post begun with a successful acquire.
func (g *postGuard) release() { g.mu.RUnlock() }

// close marks the endpoint closed once, after posts in progress have
// finished, and runs closeFn (which closes it) before any other post or
// close may proceed. Later calls do nothing.
func (g *postGuard) close(closeFn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	closeFn()
}

// postStatus maps a refused post to its status: a full queue is
// NoResources (retry later), anything else Failed.
func postStatus(errno fabric.Errno) netio.Status {
	if errno.Temporary() {
		return netio.NoResources
	}
	return netio.Failed
}
