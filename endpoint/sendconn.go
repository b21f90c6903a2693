package endpoint

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
)

// DefaultDialTimeout bounds a dial when its context has no deadline, so that
// an unreachable peer is an error, not a hang.
const DefaultDialTimeout = 10 * time.Second

// Connection states.
const (
	stateConnecting uint32 = iota
	stateConnected
	stateClosed
)

// sendConn is the connection half of a send endpoint: how it is made
// (getinfo, connect, the event queue's answer) on top of the send core,
// which does everything else.
type sendConn struct {
	sendcore.Core
	addr string
	info *fabric.Info    // freed after the endpoint is closed: sockets keeps pointers into it
	cntr *fabric.Counter // counts the sends with SendConfig.Inject (confirmInjects); closed after the endpoint

	state     atomic.Uint32 // stateConnecting, stateConnected, stateClosed
	connected chan error    // the dial's outcome, written once by handleEvent

	// drains: the endpoint receives (DialReplies), so a peer's shutdown
	// ends it only after drain, as an accepted connection's does.
	drains bool
	drain  drainer // poller goroutine only
}

// connOptions are the connection settings every send endpoint config has.
type connOptions struct {
	sendcore.Options
	deliveryComplete bool          // sends complete when placed at the peer
	progressTimeout  time.Duration // 0: no watchdog
	injectLinger     time.Duration // how long Close waits for injects to be sent (SendConfig.InjectLinger)
	maxInjectsHeld   int           // sends the provider may hold before an inject is refused (SendConfig.MaxInjectsHeld)

	// rma asks for the domain's RMA caps (DialRMA). Without it the endpoint
	// asks for fabric.CapMsg only: on sockets a listener that did not ask
	// for RMA itself, such as a plain C program's, refuses a dial that
	// does (see infoFor).
	rma bool
	// beforeConnect, when set, runs on the enabled endpoint before it
	// connects: a dial with replies posts its receive buffers there.
	beforeConnect func(ep *fabric.Endpoint) error
	// drains: the endpoint receives, so it drains after the peer's
	// shutdown (see drainer).
	drains bool
	// statsKind is the kind the endpoint registers as in the manager's
	// stats.Registry once connected ("": not at all).
	statsKind string
}

// dial connects to host:port. prepare sets up the kind's resources once the
// poller and owner exist. On error everything set up is released.
func (c *sendConn) dial(ctx context.Context, mgr *domain.Manager, kind sendcore.Kind, host, port string, o connOptions, prepare func() error) error {
	c.connected = make(chan error, 1)
	c.drains = o.drains
	o.Peer = c.addr
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	err := c.open(mgr, kind, host, port, o, prepare)
	if err == nil {
		err = c.wait(ctx)
	}
	if err != nil {
		c.state.Store(stateClosed)
		c.MarkTornDown()
		_ = c.Release()
		return connectError(c.addr, err)
	}
	if o.statsKind != "" {
		c.Register(o.statsKind)
	}
	if o.progressTimeout > 0 {
		c.WatchProgress(o.progressTimeout)
	}
	c.Log.Debug().Str("peer", c.addr).Msg("connected")
	return nil
}

func (c *sendConn) open(mgr *domain.Manager, kind sendcore.Kind, host, port string, o connOptions, prepare func() error) error {
	if err := c.Attach(mgr, kind, connHandler{c}, c.closeEndpoint, o.Options); err != nil {
		return err
	}
	if err := prepare(); err != nil {
		return err
	}
	var err error
	caps := fabric.CapMsg
	if o.rma {
		caps = mgr.Caps()
	}
	if c.info, err = infoFor(mgr, host, port, false, caps); err != nil {
		return err
	}
	c.SetInjectSize(c.info.InjectSize())
	if o.deliveryComplete {
		if err = requestDeliveryComplete(c.info); err != nil {
			return err
		}
	}
	if o.Inject {
		if err = c.confirmInjects(mgr, o.injectLinger, o.maxInjectsHeld); err != nil {
			return err
		}
	}
	ep, err := openCounted(mgr, c.Poller, c.info, c.Owner, c.cntr)
	c.Guard.Set(ep)
	if err != nil {
		return err
	}
	if o.beforeConnect != nil {
		if err = o.beforeConnect(ep); err != nil {
			return err
		}
	}
	return ep.Connect(c.info)
}

// wait returns the connection's outcome, or the context's error.
func (c *sendConn) wait(ctx context.Context) error {
	select {
	case err := <-c.connected:
		return err
	case <-ctx.Done():
		select {
		case err := <-c.connected: // connected just as the context ended
			return err
		default:
			return ctx.Err()
		}
	}
}

// connHandler is the connection's poll.Handler, kept apart so that users
// cannot call the handler methods.
type connHandler struct{ c *sendConn }

func (h connHandler) HandleCompletion(key uint32, r poll.Result) {
	if key == drainPeekKey {
		h.c.drain.peeked(r)
		return
	}
	h.c.Kind().HandleCompletion(key, r)
	h.c.AfterCompletion()
}
func (h connHandler) HandleEvent(ev fabric.Event) { h.c.handleEvent(ev) }

// handleEvent completes the dial or ends the connection. It runs on the
// poller goroutine.
func (c *sendConn) handleEvent(ev fabric.Event) {
	ev.Info.Free()
	switch c.state.Load() {
	case stateConnecting:
		var err error
		if ev.Kind == fabric.EventConnected {
			c.state.CompareAndSwap(stateConnecting, stateConnected)
		} else {
			err = closeReason(ev) // refused or failed while connecting
		}
		select {
		case c.connected <- err:
		default: // the dial gave up already
		}
	case stateConnected:
		if ev.Kind == fabric.EventShutdown && c.drains {
			c.drain.begin(c.Poller, c.Ended, c.endDrained, drainPeek(c.Mgr.Provider(), c.peek))
			return
		}
		c.end(closeReason(ev))
	}
}

// end ends the established connection for reason. It runs on the poller
// goroutine.
func (c *sendConn) end(reason error) {
	c.state.Store(stateClosed)
	c.Teardown(reason)
}

// peek posts the drain's peek (drainer.confirm), unless the endpoint is
// closing.
func (c *sendConn) peek() fabric.Errno {
	ep, ok := c.Guard.Acquire()
	if !ok {
		return fabric.EBADF
	}
	defer c.Guard.Release()
	return ep.Peek(c.Owner.Context(drainPeekKey))
}

// endDrained ends the connection once the drain after the peer's shutdown
// is over (see drainer).
func (c *sendConn) endDrained() { c.end(netio.ErrConnectionClosed) }

// closeEndpoint closes the endpoint and frees its info; the peer sees the
// connection closed. There is no fi_shutdown first on any provider: close
// alone tells the peer, and on some shutdown then close corrupts the
// provider's heap (quirks.Quirks.ShutdownCorrupts).
func (c *sendConn) closeEndpoint() {
	c.drain.stop() // nothing is delivered after the close
	if ep := c.Guard.Endpoint(); ep != nil {
		if err := ep.Close(); err != nil {
			c.Log.Error().Err(err).Msg("closing endpoint")
		}
	}
	if err := c.cntr.Close(); err != nil { // refused while the endpoint is open
		c.Log.Error().Err(err).Msg("closing the send counter")
	}
	c.info.Free()
}

// close is the endpoints' Close. A Close before the dial has its answer
// (from OnReply: a reply's completion can be read before the connected
// event) ends the dial at once with netio.ErrClosed, instead of leaving it
// to wait out its context.
func (c *sendConn) close() error {
	if c.state.Swap(stateClosed) == stateConnecting {
		select {
		case c.connected <- netio.ErrClosed:
		default: // the dial has its answer already
		}
	}
	return c.Close()
}
