package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/stats"
)

// RMA (remote memory access) in the manner of Thallium's bulk transfers: one
// side exposes memory and hands its RemoteRegion descriptor to the other
// (in a message, say); the other side pulls from it (fi_read) or pushes into
// it (fi_write) with Pull and Push on any connected endpoint of its own: an
// RMAEndpoint from DialRMA, or the ReceiveEndpoint of an accepted
// connection. The exposing side takes no part in a transfer beyond keeping
// its poller running, which the provider needs for progress.

// ErrAccessDenied reports an RMA transfer that the access of a region does
// not allow: a push into a region exposed for remote reading only, a pull
// from one exposed for writing only, or a local buffer registered without
// AccessRead (pull) or AccessWrite (push). Refused up front, the error also
// matches netio.ErrInvalidArgument and nothing was posted; refused by the
// provider, it also matches netio.ErrFailed.
var ErrAccessDenied = errors.New("endpoint: RMA access denied")

// rmaKind is the send core's view of an RMAEndpoint: the engine.
type rmaKind struct{ *rmaOps }

func (k rmaKind) HandleCompletion(key uint32, r poll.Result) { k.handleCompletion(key, r) }
func (k rmaKind) CancelPending(reason error)                 { k.cancelPending(reason) }

// ReleaseResources has nothing to free: the local memory is the caller's.
func (rmaKind) ReleaseResources() error { return nil }

// Progress: RMA transfers are bounded by their contexts, not by a
// progress timeout.
func (rmaKind) Progress() (bool, uint64) { return false, 0 }

// FillStats: RMA transfers are not messages; the record counts the
// connection only.
func (rmaKind) FillStats(*stats.Endpoint) {}

// RMAConfig configures an RMA endpoint.
type RMAConfig struct {
	// Params tunes chunking; defaults apply to zero fields.
	Params RMAParams
	// OnConnectionClosed is called once when the connection ends, as for
	// SendConfig. Transfers still in flight finish with netio.ErrCanceled
	// first. It runs on the poller goroutine and must not block. May be nil.
	OnConnectionClosed func(err error)
	// Runtime names the poller to share and the logger.
	cq.Runtime
}

// RMAEndpoint is a connection used only for RMA: it pulls from and pushes
// into regions its peer exposed. It sends no messages.
type RMAEndpoint struct {
	rmaOps // PullAsync, PushAsync, Pull, Push
	c      sendConn
}

// DialRMA connects to the listener at addr ("HOST:PORT") like Dial and
// returns an RMA endpoint. The domain must support RMA
// (Manager.SupportsRMA).
func DialRMA(ctx context.Context, mgr *domain.Manager, addr string, cfg RMAConfig) (*RMAEndpoint, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	}
	if !mgr.SupportsRMA() {
		return nil, fmt.Errorf("%w: endpoint: provider %s has no RMA in this domain", netio.ErrInvalidArgument, mgr.Provider())
	}
	if err := cfg.Params.validate(); err != nil {
		return nil, err
	}
	host, port, err := splitAddr(addr, false)
	if err != nil {
		return nil, err
	}
	s := &RMAEndpoint{}
	s.c.addr = addr
	opts := connOptions{Options: sendcore.Options{Poller: cfg.Poller, PollerConfig: cfg.PollerConfig, Log: cfg.Logger,
		OnClosed: cfg.OnConnectionClosed}, rma: true, statsKind: stats.KindRMA}
	prepare := func() error {
		s.rmaOps.init(mgr, s.c.Poller, s.c.Owner, &s.c.Guard, cfg.Params, cfg.Logger)
		return nil
	}
	if err := s.c.dial(ctx, mgr, rmaKind{&s.rmaOps}, host, port, opts, prepare); err != nil {
		return nil, err
	}
	return s, nil
}

// RemoteAddr returns the address the endpoint was dialled with.
func (s *RMAEndpoint) RemoteAddr() string { return s.c.addr }

// Close ends the connection: transfers in flight finish with
// netio.ErrCanceled and the endpoint's own poller stops. It is idempotent
// and may be called from a callback.
func (s *RMAEndpoint) Close() error { return s.c.close() }

// PullAsync starts reading length bytes of remote, from remoteOff, into
// local at localOff (fi_read); a server pulls a client's data this way.
// local must be registered in the endpoint's domain with domain.AccessRead.
// Arguments outside local or remote, or an access they do not grant, are
// an error and nothing is posted. It does not block, so it may be called
// from a callback; wait for the result on another goroutine.
func (e *rmaOps) PullAsync(local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (*RMAOp, error) {
	return e.startAsync(false, local, localOff, remote, remoteOff, length)
}

// PushAsync starts writing length bytes of local, from localOff, into
// remote at remoteOff (fi_write). local must be registered with
// domain.AccessWrite. Bad arguments are refused as for PullAsync.
func (e *rmaOps) PushAsync(local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (*RMAOp, error) {
	return e.startAsync(true, local, localOff, remote, remoteOff, length)
}

func (e *rmaOps) startAsync(write bool, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (*RMAOp, error) {
	op := &RMAOp{done: make(chan struct{})}
	if err := e.start(op, write, local, localOff, remote, remoteOff, length); err != nil {
		return nil, err
	}
	return op, nil
}

// Pull is PullAsync followed by Wait: it returns the bytes moved. When ctx
// ends first the transfer goes on; see RMAOp.Wait. It blocks: never call it
// from a callback, whose poller goroutine must run for the transfer to
// finish. It does not allocate when the transfer succeeds.
func (e *rmaOps) Pull(ctx context.Context, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (int, error) {
	return e.transfer(ctx, false, local, localOff, remote, remoteOff, length)
}

// Push is PushAsync followed by Wait. It blocks: never call it from a
// callback. It does not allocate when the transfer succeeds.
func (e *rmaOps) Push(ctx context.Context, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (int, error) {
	return e.transfer(ctx, true, local, localOff, remote, remoteOff, length)
}

// syncOps recycles the operations of the synchronous Pull and Push, so
// that a transfer waited for in place allocates nothing. An operation
// goes back only after it has finished: one whose wait was abandoned is
// left to the garbage collector.
var syncOps = sync.Pool{New: func() any { return &RMAOp{done: make(chan struct{}, 1), reused: true} }}

// transfer runs one operation and waits for it, with an operation object
// from syncOps that goes back once it has finished.
func (e *rmaOps) transfer(ctx context.Context, write bool, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) (int, error) {
	op := syncOps.Get().(*RMAOp)
	if err := e.start(op, write, local, localOff, remote, remoteOff, length); err != nil {
		syncOps.Put(op) // never started
		return 0, err
	}
	select {
	case <-op.done:
	default:
		select {
		case <-op.done:
		case <-ctx.Done():
			return 0, ctx.Err() // still in flight: op is not reused
		}
	}
	n, err := op.n, op.err
	syncOps.Put(op)
	return n, err
}
