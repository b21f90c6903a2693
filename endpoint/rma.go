package endpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
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

// RemoteRegion describes memory a peer exposed for RMA. It is small and
// plain, made to travel: MarshalBinary gives a fixed, versioned layout
// that UnmarshalBinary checks.
type RemoteRegion struct {
	// Addr is the address of the region's first byte as the exposing
	// provider wants it in fi_read/fi_write: its virtual address when the
	// domain has FI_MR_VIRT_ADDR, otherwise an offset from the start of the
	// registration (0). tcp and sockets in libfabric 1.17 use offsets.
	Addr uint64
	// Len is the region's length in bytes.
	Len uint64
	// Key is the registration's remote key (fi_mr_key).
	Key uint64
	// Access is what the peer may do: domain.AccessRemoteRead (Pull),
	// domain.AccessRemoteWrite (Push), or both.
	Access domain.Access
}

// Layout of a marshalled RemoteRegion, little-endian:
//
//	0  magic "NRMR"
//	4  version (1)
//	5  three zero bytes
//	8  Addr   uint64
//	16 Len    uint64
//	24 Key    uint64
//	32 Access uint64
const (
	// RemoteRegionSize is the length of a marshalled RemoteRegion.
	RemoteRegionSize    = 40
	remoteRegionVersion = 1
	remoteRegionMagic   = "NRMR"
)

const remoteAccess = domain.AccessRemoteRead | domain.AccessRemoteWrite

func (d RemoteRegion) validate() error {
	switch {
	case d.Len == 0:
		return fmt.Errorf("%w: endpoint: remote region of 0 bytes", netio.ErrInvalidArgument)
	case d.Addr+d.Len < d.Addr:
		return fmt.Errorf("%w: endpoint: remote region %#x+%d wraps around", netio.ErrInvalidArgument, d.Addr, d.Len)
	case d.Access == 0 || d.Access&^remoteAccess != 0:
		return fmt.Errorf("%w: endpoint: remote region access %s: want remote read and/or remote write",
			netio.ErrInvalidArgument, accessString(d.Access))
	}
	return nil
}

// AppendBinary appends the descriptor's fixed layout (RemoteRegionSize
// bytes) to b. A descriptor that could not be unmarshalled is refused.
func (d RemoteRegion) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	b = append(b, remoteRegionMagic...)
	b = append(b, remoteRegionVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, d.Addr)
	b = binary.LittleEndian.AppendUint64(b, d.Len)
	b = binary.LittleEndian.AppendUint64(b, d.Key)
	return binary.LittleEndian.AppendUint64(b, uint64(d.Access)), nil
}

// MarshalBinary returns the descriptor's fixed layout, RemoteRegionSize
// bytes.
func (d RemoteRegion) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, RemoteRegionSize))
}

// UnmarshalBinary parses a descriptor made by MarshalBinary. Anything else
// (wrong length, magic or version, non-zero padding, an empty or wrapping
// region, access other than remote read/write) is an error matching
// netio.ErrInvalidArgument, and d is left unchanged.
func (d *RemoteRegion) UnmarshalBinary(b []byte) error {
	if len(b) != RemoteRegionSize {
		return fmt.Errorf("%w: endpoint: remote region descriptor of %d bytes, want %d",
			netio.ErrInvalidArgument, len(b), RemoteRegionSize)
	}
	if string(b[:4]) != remoteRegionMagic {
		return fmt.Errorf("%w: endpoint: not a remote region descriptor (magic %q)", netio.ErrInvalidArgument, b[:4])
	}
	if b[4] != remoteRegionVersion {
		return fmt.Errorf("%w: endpoint: remote region descriptor version %d, want %d",
			netio.ErrInvalidArgument, b[4], remoteRegionVersion)
	}
	if b[5]|b[6]|b[7] != 0 {
		return fmt.Errorf("%w: endpoint: remote region descriptor has non-zero padding", netio.ErrInvalidArgument)
	}
	v := RemoteRegion{
		Addr:   binary.LittleEndian.Uint64(b[8:]),
		Len:    binary.LittleEndian.Uint64(b[16:]),
		Key:    binary.LittleEndian.Uint64(b[24:]),
		Access: domain.Access(binary.LittleEndian.Uint64(b[32:])),
	}
	if err := v.validate(); err != nil {
		return err
	}
	*d = v
	return nil
}

// accessString names access bits for error messages.
func accessString(a domain.Access) string {
	var names []string
	for _, f := range []struct {
		bit  domain.Access
		name string
	}{
		{domain.AccessSend, "send"}, {domain.AccessRecv, "recv"},
		{domain.AccessRead, "read"}, {domain.AccessWrite, "write"},
		{domain.AccessRemoteRead, "remote-read"}, {domain.AccessRemoteWrite, "remote-write"},
	} {
		if a&f.bit != 0 {
			names = append(names, f.name)
			a &^= f.bit
		}
	}
	if a != 0 {
		names = append(names, fmt.Sprintf("%#x", uint64(a)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// ExposedRegion is memory registered for remote access. Hand its
// Descriptor to the peer; Close withdraws it.
type ExposedRegion struct {
	reg  *domain.Registration
	mem  []byte
	pin  runtime.Pinner // pins Go memory given to Expose until Close
	desc RemoteRegion

	mu     sync.Mutex
	closed bool
}

// Expose registers mem for the remote access asked for:
// domain.AccessRemoteRead (peers may Pull from it),
// domain.AccessRemoteWrite (peers may Push into it), or both, and nothing
// else, so that a peer can do no more than the caller meant. Go memory is
// pinned until Close. The domain must support RMA (Manager.SupportsRMA).
func Expose(mgr *domain.Manager, mem []byte, access domain.Access) (*ExposedRegion, error) {
	if err := checkExpose(mgr, len(mem), access); err != nil {
		return nil, err
	}
	e := &ExposedRegion{mem: mem}
	e.pin.Pin(&mem[0])
	reg, err := mgr.Register(uintptr(unsafe.Pointer(&mem[0])), len(mem), access)
	if err != nil {
		e.pin.Unpin()
		return nil, fmt.Errorf("endpoint: expose %d bytes: %w", len(mem), err)
	}
	e.setReg(mgr, reg)
	return e, nil
}

// AllocExposed allocates size bytes outside the Go heap (page-aligned,
// zeroed) and exposes them like Expose. Bytes returns the memory; Close
// unregisters and unmaps it.
func AllocExposed(mgr *domain.Manager, size int, access domain.Access) (*ExposedRegion, error) {
	if err := checkExpose(mgr, size, access); err != nil {
		return nil, err
	}
	reg, err := mgr.AllocRegistered(size, access)
	if err != nil {
		return nil, fmt.Errorf("endpoint: expose %d bytes: %w", size, err)
	}
	e := &ExposedRegion{mem: reg.Bytes()[:size]} // the mapping is whole pages
	e.setReg(mgr, reg)
	return e, nil
}

func checkExpose(mgr *domain.Manager, size int, access domain.Access) error {
	switch {
	case mgr == nil:
		return fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	case !mgr.SupportsRMA():
		return fmt.Errorf("%w: endpoint: provider %s has no RMA in this domain", netio.ErrInvalidArgument, mgr.Provider())
	case size <= 0:
		return fmt.Errorf("%w: endpoint: expose %d bytes", netio.ErrInvalidArgument, size)
	case access == 0 || access&^remoteAccess != 0:
		return fmt.Errorf("%w: endpoint: expose with access %s: want remote read and/or remote write only",
			netio.ErrInvalidArgument, accessString(access))
	}
	return nil
}

// setReg fills in the descriptor: the address a peer uses depends on the
// domain's mr_mode (virtual address, or offset 0 of the registration).
func (e *ExposedRegion) setReg(mgr *domain.Manager, reg *domain.Registration) {
	e.reg = reg
	var addr uint64
	if mgr.Info().MRVirtAddr() {
		addr = uint64(reg.Addr())
	}
	e.desc = RemoteRegion{Addr: addr, Len: uint64(reg.Len()), Key: reg.Key(), Access: reg.Access()}
}

// Descriptor returns what a peer needs to Pull from or Push into the
// region.
func (e *ExposedRegion) Descriptor() RemoteRegion { return e.desc }

// Bytes returns the exposed memory. Peers may change it at any time while
// exposed for remote writing.
func (e *ExposedRegion) Bytes() []byte { return e.mem }

// Close withdraws remote access (a peer's later transfer fails) and
// unregisters the memory; memory from AllocExposed is unmapped, Go memory
// unpinned. It is idempotent.
func (e *ExposedRegion) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.reg.Close()
	e.pin.Unpin()
	return err
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

// syncOps recycles the operations of the synchronous Pull and Push, so
// that a transfer waited for in place allocates nothing. An operation
// goes back only after it has finished: one whose wait was abandoned is
// left to the garbage collector.
var syncOps = sync.Pool{New: func() any { return &RMAOp{done: make(chan struct{}, 1), reused: true} }}

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
	poller *cq.Poller
	owner  cq.Owner
	chunk  uint64
	window int
	log    zerolog.Logger

	guard *postGuard // the endpoint to post on

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
func (e *rmaOps) init(mgr *domain.Manager, p *cq.Poller, owner cq.Owner, guard *postGuard, params RMAParams, log zerolog.Logger) {
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
			ErrAccessDenied, netio.ErrInvalidArgument, verb, accessString(local.Access()), accessString(localNeed))
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
			ErrAccessDenied, netio.ErrInvalidArgument, verb, accessString(remote.Access))
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
		ep, ok := e.guard.acquire()
		if !ok {
			return // closing: cancelPending reports what is queued
		}
		var errno fabric.Errno
		if op.write {
			errno = ep.Write(op.laddr+uintptr(op.posted), int(n), op.desc, op.raddr+op.posted, op.rkey, e.owner.Context(key))
		} else {
			errno = ep.Read(op.laddr+uintptr(op.posted), int(n), op.desc, op.raddr+op.posted, op.rkey, e.owner.Context(key))
		}
		e.guard.release()
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
func (e *rmaOps) handleCompletion(key uint32, r cq.Result) {
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
// it: a local close reports through cancelPending, after the endpoint has
// stopped reading completions.
func (e *rmaOps) completionError(op *RMAOp, r cq.Result) error {
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

// rmaKind is the sendKind of an RMAEndpoint: the engine, told why the
// connection ended.
type rmaKind struct {
	*rmaOps
	c *sendConn
}

func (k rmaKind) cancelPending() { k.rmaOps.cancelPending(k.c.reason) }

// releaseResources has nothing to free: the local memory is the caller's.
func (rmaKind) releaseResources() error { return nil }

// RMAConfig configures an RMA endpoint.
type RMAConfig struct {
	// Params tunes chunking; defaults apply to zero fields.
	Params RMAParams
	// OnConnectionClosed is called once when the connection ends, as for
	// SendConfig. Transfers still in flight finish with netio.ErrCanceled
	// first. It runs on the poller goroutine and must not block. May be nil.
	OnConnectionClosed func(err error)
	// Poller, PollerConfig and Logger are as for SendConfig.
	Poller       *cq.Poller
	PollerConfig cq.Config
	Logger       zerolog.Logger
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
	s.c = sendConn{mgr: mgr, addr: addr}
	s.c.kind = rmaKind{&s.rmaOps, &s.c}
	opts := connOptions{poller: cfg.Poller, pollerConfig: cfg.PollerConfig, log: cfg.Logger, onClosed: cfg.OnConnectionClosed, rma: true}
	prepare := func() error {
		s.rmaOps.init(mgr, s.c.poller, s.c.owner, &s.c.guard, cfg.Params, cfg.Logger)
		return nil
	}
	if err := s.c.dial(ctx, host, port, opts, prepare); err != nil {
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
