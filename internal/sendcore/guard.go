package sendcore

import (
	"sync"

	"github.com/netio-go/netio/fabric"
)

// Guard orders posts on an endpoint against its close: a post holds it
// shared while it calls into libfabric, the close takes it exclusively
// once, and later posts are refused. Every endpoint kind posts through one.
type Guard struct {
	mu     sync.RWMutex
	ep     *fabric.Endpoint
	closed bool
}

// Set installs the endpoint once it is open.
func (g *Guard) Set(ep *fabric.Endpoint) { g.ep = ep }

// Endpoint returns the endpoint, nil before Set.
func (g *Guard) Endpoint() *fabric.Endpoint { return g.ep }

// Acquire returns the endpoint and holds off its close until Release; ok
// is false once the endpoint is closed (or was never opened).
func (g *Guard) Acquire() (ep *fabric.Endpoint, ok bool) {
	g.mu.RLock()
	if g.closed || g.ep == nil {
		g.mu.RUnlock()
		return nil, false
	}
	return g.ep, true
}

// Release ends a post begun with a successful Acquire.
func (g *Guard) Release() { g.mu.RUnlock() }

// Close marks the endpoint closed once, after posts in progress have
// finished, and runs closeFn (which closes it) before any other post or
// close may proceed. Later calls do nothing.
func (g *Guard) Close(closeFn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	closeFn()
}
