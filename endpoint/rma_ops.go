package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
)

// Defaults for RMAParams.
const (
	// DefaultRMAChunkSize is the largest piece one fi_read or fi_write
	// moves. Large enough that per-chunk costs (a post, a completion) do
	// not matter; small enough that a few chunks in flight keep the link
	// busy while the provider works on one.
	DefaultRMAChunkSize = 1 << 20
	// DefaultRMAMaxInFlight bounds the chunks an endpoint has posted at
	// once. It is further capped by the provider's transmit queue depth.
	DefaultRMAMaxInFlight = 16
)

// Limits of the RMA key space (see rmaKey).
const (
	rmaKeyFlag  = uint32(1) << 31 // the completion is an RMA chunk's, not a receive's
	rmaLastFlag = uint32(1) << 30 // the chunk is its operation's last
	maxRMAOps   = 1 << 16         // operations in flight per endpoint
)

// isRMAKey reports whether a completion key belongs to an RMA chunk. Receive
// keys (buffer indexes) stay far below rmaKeyFlag.
func isRMAKey(key uint32) bool { return key&rmaKeyFlag != 0 }

// RMAParams tunes how transfers are split and posted.
type RMAParams struct {
	// ChunkSize is the largest piece one fi_read or fi_write moves; longer
	// transfers are split and their operation completes when every piece
	// has. 0 selects DefaultRMAChunkSize. It is capped by the provider's
	// max_msg_size.
	ChunkSize int
	// MaxInFlight bounds the chunks the endpoint has posted at once; the
	// rest wait and are posted as earlier ones complete. 0 selects
	// DefaultRMAMaxInFlight. It is capped by the transmit queue depth.
	MaxInFlight int
}

func (p RMAParams) validate() error {
	if p.ChunkSize < 0 || p.MaxInFlight < 0 {
		return fmt.Errorf("%w: endpoint: negative RMA chunk size %d or in-flight limit %d",
			netio.ErrInvalidArgument, p.ChunkSize, p.MaxInFlight)
	}
	return nil
}

// RMAOp is one transfer in flight. Wait, or Done, tells when it has
// finished; until then the local memory must stay registered and untouched.
type RMAOp struct {
	write    bool
	slot     uint32
	laddr    uintptr
	desc     uintptr
	raddr    uint64
	rkey     uint64
	length   uint64
	posted   uint64 // bytes posted so far
	pending  int    // chunks posted and not completed
	chunks   uint64 // chunks completed OK, but the last
	lastDone bool   // the last (possibly short) chunk completed OK
	// done is closed when the operation finishes; an operation of the
	// synchronous Pull and Push (reused) gets one token in it instead,
	// since a closed channel cannot be reused.
	done   chan struct{}
	reused bool
	n      int
	err    error
}

// Done is closed when the transfer has finished, well or not.
func (o *RMAOp) Done() <-chan struct{} { return o.done }

// Wait waits for the transfer to finish and returns the bytes moved (the
// full length when err is nil). An error matching netio.ErrCanceled means
// the endpoint closed first; netio.ErrFailed, that the provider reported
// an error (ErrAccessDenied too when the peer's registration refused the
// access). When ctx ends first, Wait returns ctx's error and the transfer
// goes on: the local memory must stay as it is until Done is closed. Wait
// may be called any number of times.
func (o *RMAOp) Wait(ctx context.Context) (int, error) {
	select {
	case <-o.done:
		return o.n, o.err
	default:
	}
	select {
	case <-o.done:
		return o.n, o.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// rmaOps posts RMA transfers on one connected endpoint, splits them into
// chunks, and maps chunk completions back to their operations. It posts
// through the guard of the endpoint it belongs to.
type rmaOps struct {
	mgr    *domain.Manager
	poller *poll.Poller
	owner  poll.Owner
	chunk  uint64
	window int
	log    zerolog.Logger

	guard *sendcore.Guard // the endpoint to post on

	mu       sync.Mutex
	stopped  bool     // canceled: refuse new operations
	slots    []*RMAOp // operations in flight, by slot
	free     []uint32
	queue    []*RMAOp // operations with chunks not posted yet, oldest first
	inflight int      // chunks posted and not completed
	retrying bool     // a retry of a post refused with EAGAIN is scheduled
}

// init sets the engine up for an endpoint of mgr whose completions reach
// owner on poller.
func (e *rmaOps) init(mgr *domain.Manager, p *poll.Poller, owner poll.Owner, guard *sendcore.Guard, params RMAParams, log zerolog.Logger) {
	e.mgr, e.poller, e.owner, e.guard, e.log = mgr, p, owner, guard, log
	chunk := uint64(params.ChunkSize)
	if chunk == 0 {
		chunk = DefaultRMAChunkSize
	}
	if m := mgr.Info().MaxMsgSize(); m > 0 && chunk > m {
		chunk = m
	}
	e.chunk = chunk
	e.window = params.MaxInFlight
	if e.window == 0 {
		e.window = DefaultRMAMaxInFlight
	}
	if tx := mgr.Info().TxSize(); tx > 0 && e.window > tx {
		e.window = tx
	}
}

// start validates a transfer into op (a new operation, or a recycled one
// of the synchronous path) and posts as much of it as the window allows.
// Bad arguments come back as an error and nothing is posted.
func (e *rmaOps) start(op *RMAOp, write bool, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) error {
	if err := e.check(write, local, localOff, remote, remoteOff, length); err != nil {
		return err
	}
	*op = RMAOp{write: write, done: op.done, reused: op.reused,
		laddr: local.Addr() + uintptr(localOff), desc: local.Desc(),
		raddr: remote.Addr + remoteOff, rkey: remote.Key, length: uint64(length)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return fmt.Errorf("endpoint: %s: %w", op.verb(), netio.ErrClosed)
	}
	if len(e.free) == 0 {
		if len(e.slots) >= maxRMAOps {
			return fmt.Errorf("%w: endpoint: %d RMA operations in flight", netio.ErrNoResources, len(e.slots))
		}
		e.slots = append(e.slots, nil)
		e.free = append(e.free, uint32(len(e.slots)-1))
	}
	op.slot = e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	e.slots[op.slot] = op
	e.queue = append(e.queue, op)
	e.pump()
	return nil
}

func (e *rmaOps) check(write bool, local *domain.Registration, localOff int, remote RemoteRegion, remoteOff uint64, length int) error {
	verb, localNeed, remoteNeed := "pull", domain.AccessRead, domain.AccessRemoteRead
	if write {
		verb, localNeed, remoteNeed = "push", domain.AccessWrite, domain.AccessRemoteWrite
	}
	switch {
	case e.mgr == nil:
		return fmt.Errorf("endpoint: %s: %w", verb, netio.ErrClosed)
	case !e.mgr.SupportsRMA():
		return fmt.Errorf("%w: endpoint: %s: provider %s has no RMA in this domain", netio.ErrInvalidArgument, verb, e.mgr.Provider())
	case local == nil:
		return fmt.Errorf("%w: endpoint: %s: nil local registration", netio.ErrInvalidArgument, verb)
	case local.Domain() != e.mgr:
		return fmt.Errorf("%w: endpoint: %s: local memory is registered in another domain", netio.ErrInvalidArgument, verb)
	case local.Access()&localNeed == 0:
		return fmt.Errorf("%w: %w: endpoint: %s: local memory registered for %s, needs %s",
			ErrAccessDenied, netio.ErrInvalidArgument, verb, local.Access().String(), localNeed.String())
	case length <= 0 || localOff < 0 || localOff > local.Len() || length > local.Len()-localOff:
		return fmt.Errorf("%w: endpoint: %s of %d bytes at local offset %d: outside the %d-byte registration",
			netio.ErrInvalidArgument, verb, length, localOff, local.Len())
	}
	if err := remote.validate(); err != nil {
		return fmt.Errorf("endpoint: %s: %w", verb, err)
	}
	switch {
	case remote.Access&remoteNeed == 0:
		return fmt.Errorf("%w: %w: endpoint: %s: remote region exposed for %s only",
			ErrAccessDenied, netio.ErrInvalidArgument, verb, remote.Access.String())
	case remoteOff > remote.Len || uint64(length) > remote.Len-remoteOff:
		return fmt.Errorf("%w: endpoint: %s of %d bytes at remote offset %d: outside the %d-byte region",
			netio.ErrInvalidArgument, verb, length, remoteOff, remote.Len)
	}
	return nil
}

func (o *RMAOp) verb() string {
	if o.write {
		return "push"
	}
	return "pull"
}

// pump posts queued chunks while the window has room. A post refused for a
// full queue is retried when a chunk completes, or after a short pause
// when none is in flight. It runs with e.mu held.
func (e *rmaOps) pump() {
	for len(e.queue) > 0 && e.inflight < e.window {
		op := e.queue[0]
		n := min(e.chunk, op.length-op.posted)
		key := rmaKeyFlag | op.slot
		if op.posted+n == op.length {
			key |= rmaLastFlag
		}
		ep, ok := e.guard.Acquire()
		if !ok {
			return // closing: cancelPending reports what is queued
		}
		var errno fabric.Errno
		if op.write {
			errno = ep.Write(op.laddr+uintptr(op.posted), int(n), op.desc, op.raddr+op.posted, op.rkey, e.owner.Context(key))
		} else {
			errno = ep.Read(op.laddr+uintptr(op.posted), int(n), op.desc, op.raddr+op.posted, op.rkey, e.owner.Context(key))
		}
		e.guard.Release()
		if errno.Temporary() {
			if e.inflight == 0 {
				e.retryLater()
			}
			return
		}
		if errno != 0 {
			e.dequeue()
			op.posted = op.length // post no more of it
			op.fail(fmt.Errorf("%w: endpoint: posting %s of %d bytes: %w", netio.ErrFailed, op.verb(), n, errno))
			if op.pending == 0 {
				e.finish(op)
			}
			continue
		}
		op.posted += n
		op.pending++
		e.inflight++
		if op.posted == op.length {
			e.dequeue()
		}
	}
}

// dequeue drops the head of the queue; copying keeps the backing array, so
// a steady stream of operations does not allocate.
func (e *rmaOps) dequeue() {
	copy(e.queue, e.queue[1:])
	e.queue[len(e.queue)-1] = nil
	e.queue = e.queue[:len(e.queue)-1]
}

// retryLater pumps again shortly: with nothing in flight no completion
// would do it. Runs with e.mu held.
func (e *rmaOps) retryLater() {
	if e.retrying {
		return
	}
	e.retrying = true
	time.AfterFunc(50*time.Microsecond, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.retrying = false
		if !e.stopped {
			e.pump()
		}
	})
}

func (o *RMAOp) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// finish frees the operation's slot and wakes its waiters. Runs with e.mu
// held.
func (e *rmaOps) finish(op *RMAOp) {
	e.slots[op.slot] = nil
	e.free = append(e.free, op.slot)
	op.n = int(op.chunks * e.chunk)
	if op.lastDone {
		op.n += int(op.length - (op.length-1)/e.chunk*e.chunk)
	}
	if op.reused {
		op.done <- struct{}{} // room for one: its only waiter takes it
	} else {
		close(op.done)
	}
}

// handleCompletion accounts one chunk and finishes its operation after the
// last. It runs on the poller goroutine.
func (e *rmaOps) handleCompletion(key uint32, r poll.Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	slot := key &^ (rmaKeyFlag | rmaLastFlag)
	if int(slot) >= len(e.slots) || e.slots[slot] == nil {
		return // canceled already
	}
	op := e.slots[slot]
	op.pending--
	e.inflight--
	switch {
	case r.Status == netio.OK && key&rmaLastFlag != 0:
		op.lastDone = true
	case r.Status == netio.OK:
		op.chunks++
	default:
		op.fail(e.completionError(op, r))
		if op.posted < op.length { // post no more of it
			for i, q := range e.queue {
				if q == op {
					e.queue = append(e.queue[:i], e.queue[i+1:]...)
					break
				}
			}
			op.posted = op.length
		}
	}
	if op.pending == 0 && op.posted == op.length {
		e.finish(op)
	}
	e.pump()
}

// completionError describes a chunk that completed with an error. A
// chunk the provider canceled was canceled by the connection ending under
// it: a local close reports through cancelPending as it closes the
// endpoint, so the flushed chunks its read-out reads find their
// operations reported already.
func (e *rmaOps) completionError(op *RMAOp, r poll.Result) error {
	if r.Status == netio.Canceled {
		return op.canceled(netio.ErrConnectionClosed)
	}
	e.log.Warn().Str("op", op.verb()).Uint64("bytes", op.length).Err(r.Errno).Msg("RMA transfer failed")
	if r.Errno == fabric.EACCES || r.Errno == fabric.ENOKEY {
		return fmt.Errorf("%w: %w: endpoint: %s of %d bytes: %w", ErrAccessDenied, netio.ErrFailed, op.verb(), op.length, r.Errno)
	}
	return fmt.Errorf("%w: endpoint: %s of %d bytes: %w", netio.ErrFailed, op.verb(), op.length, r.Errno)
}

// canceled is the error of an operation the connection's end cut short:
// reason is netio.ErrClosed after a local Close, or matches
// netio.ErrConnectionClosed when the peer ended the connection or it
// broke. tcp in libfabric 1.17 ends the connection, telling the initiator
// nothing more, when the target's registration refuses an access (a forged
// or stale descriptor), so that is said too.
func (op *RMAOp) canceled(reason error) error {
	if errors.Is(reason, netio.ErrClosed) {
		return fmt.Errorf("endpoint: %s of %d bytes: %w: the endpoint closed", op.verb(), op.length, netio.ErrCanceled)
	}
	return fmt.Errorf("endpoint: %s of %d bytes: %w: %w with the transfer in flight "+
		"(tcp ends the connection when the peer's registration refuses the access)",
		op.verb(), op.length, netio.ErrCanceled, reason)
}

// cancelPending finishes every operation still in flight as canceled, for
// the reason the connection ended (see RMAOp.canceled). The endpoint is
// closed, so the provider holds none of the memory any more.
func (e *rmaOps) cancelPending(reason error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stopped = true
	clear(e.queue)
	e.queue = e.queue[:0]
	for _, op := range e.slots {
		if op != nil {
			op.fail(op.canceled(reason))
			e.finish(op)
		}
	}
	e.inflight = 0
}
