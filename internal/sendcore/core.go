// Package sendcore is the send core every sender kind shares: the poller
// it is attached to, the guard that orders posts against the endpoint's
// close, the hand-off of large posts to the poller goroutine, the report of
// each operation's key exactly once (and of every pending key at close),
// the counters, the progress watchdog, and the order in which an endpoint
// ends: endpoint closed, pending operations reported, OnConnectionClosed,
// resources freed.
//
// It knows nothing of how an endpoint was opened: a connected endpoint
// (package endpoint) dials and accepts over the event queue, a
// connectionless one posts to addresses; both install their libfabric
// endpoint in the Guard and give the core a Kind.
package sendcore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/stats"
)

// Kind is what a sender kind adds to the core. Every method runs on the
// poller goroutine except ReleaseResources and Progress.
type Kind interface {
	// HandleCompletion hands back what the operation with this key held and
	// reports it, unless CancelPending already did.
	HandleCompletion(key uint32, r poll.Result)
	// CancelPending reports every pending operation as Canceled. The
	// endpoint is closed, so the provider holds nothing any more; reason
	// says why it ended.
	CancelPending(reason error)
	// ReleaseResources frees the kind's memory once the endpoint is
	// closed. It runs once, from teardown or from a failed open.
	ReleaseResources() error
	// FillStats adds what the kind counts beyond the core's Counters to
	// its record in the manager's stats.Registry: its buffers and anything
	// else it has. It runs on any goroutine, once Register has
	// been called, and reads atomics only (see package stats).
	FillStats(e *stats.Endpoint)
	// Progress reports whether operations are pending and how many have
	// finished so far, for the progress watchdog. It is safe for
	// concurrent use.
	Progress() (pending bool, finished uint64)
}

// Options are the settings every sender config has.
type Options struct {
	Poller       *cq.Poller // shared; nil opens one of the core's own
	PollerConfig cq.Config  // for the core's own poller
	Log          zerolog.Logger
	Peer         string      // for log messages
	OnClosed     func(error) // OnConnectionClosed; may be nil
	// OnSendCompleted receives the keys reported through Complete and
	// CancelAll; may be nil.
	OnSendCompleted func(key uint64, st netio.Status)
	// PostOnPoller has the poller goroutine post every send, whatever its
	// size, so that the provider is called from one thread only (see
	// internal/quirks: the connectionless providers here are not safe to
	// call from several at once). A send made on the poller goroutine (from
	// a callback) is posted at once, unless sends are queued before it.
	PostOnPoller bool
	// ReportedAtPost marks the keys of sends that the kind's post may report
	// before it returns (rdm's untracked injects: the provider took the
	// copy, and no completion follows); a key with any of these bits is
	// counted before it is posted, whatever PostOnPoller says (see
	// Core.Send).
	ReportedAtPost uint32
	// Inject posts a send of at most the provider's inject_size bytes with
	// fi_inject and reports its key OK once the provider has copied it,
	// without a provider completion (see InitInject): OK then means the
	// provider holds a copy, not that it has left the provider.
	Inject bool
}

// Core is the state every sender shares; embed it by value and call Attach
// before anything else.
type Core struct {
	Mgr      *domain.Manager
	Poller   *poll.Poller
	Owner    poll.Owner
	Log      zerolog.Logger
	Guard    Guard    // the endpoint; posts against close
	Counters Counters // what was sent and how it ended

	own      *cq.Poller // the core's own poller, or nil when shared
	kind     Kind
	opts     Options
	closeEP  func() // closes the endpoint and what the opener must free with it
	torn     atomic.Bool
	ended    atomic.Bool // over: hand out nothing new
	reason   error       // why it ended; set by Teardown before CancelPending
	closer   Closer
	freeOnce sync.Once
	freeErr  error
	watchdog atomic.Pointer[time.Timer]

	// entry is the endpoint in the manager's stats.Registry from Register
	// until free; freed says free has begun, for a Register that races it.
	entry atomic.Pointer[stats.Entry]
	freed atomic.Bool

	hand handOff // sends for the poller goroutine to post (HandOffSize)
	// postDirect: a PostOnPoller send made on the poller goroutine may be
	// posted at once, as asking OnPollerGoroutine is cheap
	// (poll.FastGoroutineID); see handOffDue.
	postDirect bool
	// postSend is the kind's post of one send, by key and length (see Send).
	postSend func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno
	// runner is the kind when it posts runs of sends (RunPoster), with
	// the scratch drainHandOff hands it a run in.
	runner       RunPoster
	runKeys      [RunMax]uint32
	runNs        [RunMax]int
	drainFn      func()      // drainHandOff, bound once so that handing off does not allocate
	handOffTimer *time.Timer // drains a stalled queue if no completion does (HandOffRetry)
	inj          injector    // the inject path (Options.Inject)
	conf         confirmer   // what the provider still holds of the injects (ConfirmInjects)
	// unconfirmed counts the injects reported OK that nothing confirmed
	// sent (InjectsUnconfirmed); every kind adds to it (CountUnconfirmed).
	unconfirmed atomic.Uint64
}

// Attach attaches the core to its poller (the shared one, or one of its
// own) and registers h, the opener's handler, for the endpoint's
// completions and events. closeEP closes the libfabric endpoint once it is
// open (Guard.Endpoint non-nil) and frees what the opener keeps with it.
// On error the caller calls Release.
func (c *Core) Attach(mgr *domain.Manager, kind Kind, h poll.Handler, closeEP func(), o Options) error {
	o.Log = mgr.Logger(o.Log)
	c.Mgr, c.kind, c.closeEP, c.opts, c.Log = mgr, kind, closeEP, o, o.Log
	c.postDirect = o.PostOnPoller && poll.FastGoroutineID()
	var err error
	if c.Poller, c.own, err = AttachPoller(mgr, o.Poller, o.PollerConfig); err != nil {
		return err
	}
	c.Owner, err = c.Poller.Register(h)
	return err
}

// AttachPoller returns the poller behind shared, or opens one with cfg
// that the caller owns (own, to close) when shared is nil.
func AttachPoller(mgr *domain.Manager, shared *cq.Poller, cfg cq.Config) (p *poll.Poller, own *cq.Poller, err error) {
	if shared != nil {
		switch p := poll.Of(shared); {
		case p == nil:
			return nil, nil, fmt.Errorf("%w: a cq.Poller not from cq.Open", netio.ErrInvalidArgument)
		case shared.Domain() != mgr:
			return nil, nil, fmt.Errorf("%w: the shared poller belongs to another domain", netio.ErrInvalidArgument)
		default:
			return p, nil, nil
		}
	}
	if own, err = cq.Open(mgr, cfg); err != nil {
		return nil, nil, err
	}
	return poll.Of(own), own, nil
}

// Ended reports whether the endpoint is over: nothing new is handed out.
func (c *Core) Ended() bool { return c.ended.Load() }

// Reason says why the endpoint ended, once Teardown has run.
func (c *Core) Reason() error { return c.reason }

// Peer names the peer in log messages.
func (c *Core) Peer() string { return c.opts.Peer }

// MarkTornDown makes a later Teardown do nothing: for an endpoint that
// never came up (a failed dial), which Release alone cleans up.
func (c *Core) MarkTornDown() { c.torn.Store(true); c.ended.Store(true) }

// Teardown ends the endpoint once: it closes the libfabric endpoint (the
// provider lets go of all memory), reports every pending operation as
// Canceled, then calls OnClosed, and frees the kind's resources. It runs
// on the poller goroutine.
func (c *Core) Teardown(reason error) {
	if c.torn.Swap(true) {
		return
	}
	c.ended.Store(true)
	c.reason = reason
	if t := c.watchdog.Load(); t != nil {
		t.Stop()
	}
	c.CloseEndpoint()
	c.Poller.Unregister(c.Owner)
	c.hand.reset() // the queued sends are among those CancelPending reports
	if c.handOffTimer != nil {
		c.handOffTimer.Stop()
	}
	c.endInjects() // reported OK: the provider took them before the close
	c.kind.CancelPending(reason)
	c.Log.Debug().Str("peer", c.opts.Peer).Err(reason).Msg("connection closed")
	if c.opts.OnClosed != nil {
		c.opts.OnClosed(reason)
	}
	// Free now, not only in Close: an endpoint dropped after it ended must
	// not keep registrations, pins or a poller goroutine.
	c.free()
}

// free releases the kind's resources and stops the core's own poller,
// once; the endpoint is closed, so the provider holds nothing. Called on
// the poller goroutine, the poller's Close returns at once and its
// goroutine ends after the callback (domain.Manager.Close waits for it).
func (c *Core) free() error {
	c.freeOnce.Do(func() {
		c.freed.Store(true)
		errs := []error{c.kind.ReleaseResources()}
		c.unregister()
		if c.own != nil {
			errs = append(errs, c.own.Close())
		}
		c.freeErr = errors.Join(errs...)
		if c.freeErr != nil {
			c.Log.Error().Err(c.freeErr).Msg("releasing endpoint resources")
		}
	})
	return c.freeErr
}

// CloseEndpoint closes the libfabric endpoint, once, after posts in
// progress have finished. It runs on the poller goroutine, so that no
// queue read races with the close. The injects the provider still holds
// are counted in the same exclusive section (countUnconfirmed), so that
// every send the provider took is in the count: none is in progress, and
// none comes after.
func (c *Core) CloseEndpoint() {
	c.Guard.Close(func() {
		c.countUnconfirmed()
		c.closeEP()
	})
}

// Close is the endpoints' Close: Teardown on the poller goroutine, then
// Release. It is idempotent and may be called from a callback. With
// ConfirmInjects it first waits (up to the linger, and not from a
// callback) until the provider has sent every inject it took.
func (c *Core) Close() error {
	return c.closer.Close(c.Poller, func() error {
		c.waitSent()
		if c.Poller != nil {
			c.Poller.Do(func() { c.Teardown(netio.ErrClosed) })
		}
		return c.Release()
	})
}

// Release frees what Attach and the opener set up, in reverse order:
// after a failed open, or after Teardown.
func (c *Core) Release() error {
	c.ended.Store(true)
	if c.Poller == nil {
		return nil
	}
	c.Poller.Unregister(c.Owner)
	c.Poller.Do(c.CloseEndpoint)
	err := c.free()
	if c.own != nil {
		// free may have run on the poller goroutine, where Close does not
		// wait: wait here for the goroutine to end.
		err = errors.Join(err, c.own.Close())
	}
	return err
}

// WatchProgress ends the endpoint when sends stay pending without one
// finishing for timeout (SendConfig.ProgressTimeout).
func (c *Core) WatchProgress(timeout time.Duration) {
	c.watchdog.Store(StallWatch(c.Poller, timeout, c.kind.Progress, c.ended.Load, func() {
		reason := fmt.Errorf("%w: %w: no send completed for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		c.Log.Warn().Str("peer", c.opts.Peer).Dur("timeout", timeout).Msg("send progress timeout: closing the connection")
		c.Poller.Do(func() { c.Teardown(reason) })
	}))
}

// PostStatus maps a refused post to its status: a full queue is
// NoResources (retry later), anything else Failed.
func PostStatus(errno fabric.Errno) netio.Status {
	if errno.Temporary() {
		return netio.NoResources
	}
	return netio.Failed
}

// Kind returns the kind the core was attached with.
func (c *Core) Kind() Kind { return c.kind }

// Register adds the endpoint to its manager's stats.Registry as one of
// kind (stats.KindBuffered, ...), once it is open: the kind's FillStats
// may read everything from then on. The
// endpoint leaves it when its resources are freed, with its final
// counters and the reason it ended.
func (c *Core) Register(kind string) {
	name := cq.DefaultName
	if p := c.opts.Poller; p != nil {
		name = p.Name()
	} else if c.own != nil {
		name = c.own.Name()
	}
	c.entry.Store(c.Mgr.Registry().AddEndpoint(stats.Endpoint{Kind: kind, Peer: c.opts.Peer, Poller: name}, c.fillStats))
	if c.freed.Load() { // ended meanwhile: free may have missed the entry
		c.unregister()
	}
}

// unregister takes the endpoint out of the registry, once.
func (c *Core) unregister() {
	if e := c.entry.Swap(nil); e != nil {
		e.Remove(c.reason)
	}
}

// fillStats is the endpoint's record: the core's counters (the injects
// counted unconfirmed too, see CountUnconfirmed) and the kind's.
func (c *Core) fillStats(e *stats.Endpoint) {
	c.Counters.Fill(e)
	e.InjectsUnconfirmed = c.InjectsUnconfirmed()
	c.kind.FillStats(e)
}
