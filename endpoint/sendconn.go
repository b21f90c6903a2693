package endpoint

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
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

// sendKind is what a send endpoint adds to the connection it shares with
// the other kinds. Every method runs on the poller goroutine except
// releaseResources.
type sendKind interface {
	// handleCompletion hands back what the operation with this key held and
	// reports it, unless cancelPending already did.
	handleCompletion(key uint32, r cq.Result)
	// cancelPending reports every pending operation as Canceled. The
	// endpoint is closed, so the provider holds nothing any more;
	// sendConn.reason says why the connection ended.
	cancelPending()
	// releaseResources frees the kind's memory once the endpoint is closed.
	// It runs once, from teardown or from a failed dial.
	releaseResources() error
	// progress reports whether operations are pending and how many have
	// finished so far, for ProgressTimeout. It is safe for concurrent use.
	progress() (pending bool, finished uint64)
}

// sendConn is the connection half of a send endpoint: the poller, the
// libfabric endpoint, the connection state, and the order in which a
// connection ends (endpoint closed, pending operations reported, then
// OnConnectionClosed).
type sendConn struct {
	mgr       *domain.Manager
	addr      string
	kind      sendKind
	onClosed  func(error)
	poller    *cq.Poller
	ownPoller bool
	owner     cq.Owner
	log       zerolog.Logger

	guard postGuard    // the endpoint; posts against teardown
	info  *fabric.Info // freed after the endpoint is closed: sockets keeps pointers into it

	state     atomic.Uint32 // stateConnecting, stateConnected, stateClosed
	connected chan error    // the dial's outcome, written once by handleEvent
	ended     atomic.Bool   // the connection is over: hand out nothing new
	reason    error         // why it ended; set by teardown before cancelPending
	closer    closer

	freeOnce sync.Once // the kind's resources and the own poller go once
	freeErr  error

	watchdog atomic.Pointer[time.Timer] // ProgressTimeout's check, while connected

	handOff handOff // sends for the poller goroutine to post (HandOffSize)
	// postSend is the kind's post of one send, by key and length (see send).
	postSend     func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno
	drainFn      func()      // drainHandOff, bound once so that handing off does not allocate
	handOffTimer *time.Timer // drains a stalled queue if no completion does (handOffRetry)
}

// connOptions are the connection settings every send endpoint config has.
type connOptions struct {
	poller       *cq.Poller
	pollerConfig cq.Config
	log          zerolog.Logger
	onClosed     func(error)

	deliveryComplete bool          // sends complete when placed at the peer
	progressTimeout  time.Duration // 0: no watchdog

	// rma asks for the domain's RMA caps (DialRMA). Without it the endpoint
	// asks for fabric.CapMsg only: on sockets a listener that did not ask
	// for RMA itself, such as a plain C program's, refuses a dial that
	// does (see infoFor).
	rma bool
}

// dial connects to host:port. prepare sets up the kind's resources once the
// poller and owner exist. On error everything set up is released.
func (c *sendConn) dial(ctx context.Context, host, port string, o connOptions, prepare func() error) error {
	c.log, c.onClosed, c.connected = o.log, o.onClosed, make(chan error, 1)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	err := c.open(host, port, o, prepare)
	if err == nil {
		err = c.wait(ctx)
	}
	if err != nil {
		c.state.Store(stateClosed)
		_ = c.release()
		return connectError(c.addr, err)
	}
	if o.progressTimeout > 0 {
		c.watchProgress(o.progressTimeout)
	}
	c.log.Debug().Str("peer", c.addr).Msg("connected")
	return nil
}

func (c *sendConn) open(host, port string, o connOptions, prepare func() error) error {
	var err error
	if c.poller, c.ownPoller, err = attachPoller(c.mgr, o.poller, o.pollerConfig); err != nil {
		c.poller = nil
		return err
	}
	if c.owner, err = c.poller.Register(connHandler{c}); err != nil {
		return err
	}
	if err = prepare(); err != nil {
		return err
	}
	caps := fabric.CapMsg
	if o.rma {
		caps = c.mgr.Caps()
	}
	if c.info, err = infoFor(c.mgr, host, port, false, caps); err != nil {
		return err
	}
	if o.deliveryComplete {
		if err = requestDeliveryComplete(c.info); err != nil {
			return err
		}
	}
	if c.guard.ep, err = openEndpoint(c.mgr, c.poller, c.info, c.owner); err != nil {
		return err
	}
	return c.guard.ep.Connect(c.info)
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

// connHandler is the connection's cq.Handler, kept apart so that users
// cannot call the handler methods.
type connHandler struct{ c *sendConn }

func (h connHandler) HandleCompletion(key uint32, r cq.Result) {
	h.c.kind.handleCompletion(key, r)
	h.c.afterCompletion()
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
			c.state.Store(stateConnected)
		} else {
			err = closeReason(ev) // refused or failed while connecting
		}
		select {
		case c.connected <- err:
		default: // the dial gave up already
		}
	case stateConnected:
		c.teardown(closeReason(ev))
	}
}

// teardown ends the connection once: it closes the endpoint (the provider
// lets go of all memory), reports every pending operation as Canceled,
// then calls OnConnectionClosed. It runs on the poller goroutine.
func (c *sendConn) teardown(reason error) {
	if c.state.Swap(stateClosed) == stateClosed {
		return
	}
	c.ended.Store(true)
	c.reason = reason
	if t := c.watchdog.Load(); t != nil {
		t.Stop()
	}
	c.closeEndpoint()
	c.poller.Unregister(c.owner)
	c.handOff.reset() // the queued sends are among those cancelPending reports
	if c.handOffTimer != nil {
		c.handOffTimer.Stop()
	}
	c.kind.cancelPending()
	c.log.Debug().Str("peer", c.addr).Err(reason).Msg("connection closed")
	if c.onClosed != nil {
		c.onClosed(reason)
	}
	// Free now, not only in Close: an endpoint dropped after its connection
	// ended must not keep registrations, pins or a poller goroutine.
	c.free()
}

// free releases the kind's resources and stops the endpoint's own poller,
// once; the endpoint is closed, so the provider holds nothing. Called on
// the poller goroutine, the poller's Close returns at once and its
// goroutine ends after the callback.
func (c *sendConn) free() error {
	c.freeOnce.Do(func() {
		errs := []error{c.kind.releaseResources()}
		if c.ownPoller {
			errs = append(errs, c.poller.Close())
		}
		c.freeErr = errors.Join(errs...)
		if c.freeErr != nil {
			c.log.Error().Err(c.freeErr).Msg("releasing endpoint resources")
		}
	})
	return c.freeErr
}

// closeEndpoint closes the endpoint, once, after posts in progress have
// finished; the peer sees the connection closed. It runs on the poller
// goroutine, so that no queue read races with the close. There is no
// fi_shutdown first: shutdown followed at once by close corrupts the heap
// of the sockets provider (libfabric 1.17), and close alone tells the peer.
func (c *sendConn) closeEndpoint() {
	c.guard.close(func() {
		if err := c.guard.ep.Close(); err != nil {
			c.log.Error().Err(err).Msg("closing endpoint")
		}
		c.info.Free()
	})
}

// close is the endpoints' Close: teardown on the poller goroutine, then
// release. It is idempotent and may be called from a callback.
func (c *sendConn) close() error {
	return c.closer.close(c.poller, func() error {
		c.poller.Do(func() { c.teardown(netio.ErrClosed) })
		return c.release()
	})
}

// release frees what open set up, in reverse order: after a failed dial, or
// after teardown.
func (c *sendConn) release() error {
	c.ended.Store(true)
	if c.poller == nil {
		return nil
	}
	c.poller.Unregister(c.owner)
	if c.guard.ep != nil {
		c.poller.Do(c.closeEndpoint)
	} else {
		c.info.Free()
	}
	err := c.free()
	if c.ownPoller {
		// free may have run on the poller goroutine, where Close does not
		// wait: wait here for the goroutine to end.
		err = errors.Join(err, c.poller.Close())
	}
	return err
}
