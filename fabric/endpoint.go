package fabric

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// PassiveEndpoint listens for connection requests (fi_passive_ep).
type PassiveEndpoint struct {
	c *C.struct_fid_pep
}

// OpenPassiveEndpoint opens a passive endpoint for info (which names the
// local address; port 0 picks a free port). ctx is reported as the Context
// of events about it.
func (f *Fabric) OpenPassiveEndpoint(info *Info, ctx uint64) (*PassiveEndpoint, error) {
	if err := notOpen("fi_passive_ep", f, info); err != nil {
		return nil, err
	}
	var p *C.struct_fid_pep
	if err := opErr("fi_passive_ep", C.netio_pep_open(f.c, info.c, C.uint64_t(ctx), &p)); err != nil {
		return nil, err
	}
	return &PassiveEndpoint{c: p}, nil
}

// Bind binds the event queue that receives connection requests.
func (p *PassiveEndpoint) Bind(eq *EQ) error {
	if err := notOpen("fi_pep_bind", p, eq); err != nil {
		return err
	}
	return opErr("fi_pep_bind", C.netio_pep_bind(p.c, eq.c))
}

// Listen starts listening.
func (p *PassiveEndpoint) Listen() error {
	if err := notOpen("fi_listen", p); err != nil {
		return err
	}
	return opErr("fi_listen", C.netio_listen(p.c))
}

// Reject refuses the connection request that info describes.
func (p *PassiveEndpoint) Reject(info *Info) error {
	if err := notOpen("fi_reject", p, info); err != nil {
		return err
	}
	return opErr("fi_reject", C.netio_reject(p.c, info.c))
}

// Addr returns the bound local address as "ip:port".
func (p *PassiveEndpoint) Addr() (string, error) {
	if err := notOpen("fi_getname", p); err != nil {
		return "", err
	}
	return getName(&p.c.fid)
}

// Close closes the passive endpoint. It is safe to call more than once.
func (p *PassiveEndpoint) Close() error {
	if !p.open() {
		return nil
	}
	if err := opErr("fi_close(pep)", C.netio_close(&p.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	p.c = nil
	return nil
}

func getName(fid *C.struct_fid) (string, error) {
	var buf [80]C.char
	if err := opErr("fi_getname", C.netio_getname(fid, &buf[0], C.size_t(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// Endpoint is an active, connection-oriented endpoint (fi_endpoint).
type Endpoint struct {
	c    *C.struct_fid_ep
	rcq  *CQ      // the queue bound for its receives (BindCQ with BindRecv), the only one QueueRecv takes them on
	cqs  [2]*CQ   // the distinct queues bound (transmit, receive), counted in their bound until Close
	cntr *Counter // the send counter bound (BindCounter), counted in its bound until Close
	// injectSize is the info's inject_size: the injects refuse longer
	// messages (EINVAL), which tcp would otherwise keep a pointer to.
	injectSize int
}

// InjectSize returns the largest message Inject, InjectCounted and
// InjectTo take: the inject_size of the Info the endpoint was opened with.
func (e *Endpoint) InjectSize() int { return e.injectSize }

// injectable checks an inject of b: EBADF on a closed endpoint, EINVAL
// past the inject size.
func (e *Endpoint) injectable(b []byte) Errno {
	if !e.open() {
		return EBADF
	}
	if len(b) > e.injectSize {
		return EINVAL
	}
	return 0
}

// h passes the endpoint to the hot-path shim functions as an integer of
// its own C type, which cgo does not check (see NETIO_H in shim.h): it is
// C memory, allocated by libfabric. Go memory must never pass through such
// a conversion: an integer keeps nothing alive or in place.
func (e *Endpoint) h() C.netio_ep_h {
	return C.netio_ep_h{v: C.uintptr_t(uintptr(unsafe.Pointer(e.c)))}
}

// OpenEndpoint opens an endpoint for info: the result of GetInfo with a
// destination for a connecting side, or the Info of a connection request
// for an accepting side. ctx is reported as the Context of its events.
func (d *Domain) OpenEndpoint(info *Info, ctx uint64) (*Endpoint, error) {
	if err := notOpen("fi_endpoint", d, info); err != nil {
		return nil, err
	}
	var e *C.struct_fid_ep
	if err := opErr("fi_endpoint", C.netio_ep_open(d.c, info.c, C.uint64_t(ctx), &e)); err != nil {
		return nil, err
	}
	return &Endpoint{c: e, injectSize: info.InjectSize()}, nil
}

// BindEQ binds the event queue for connection events.
func (e *Endpoint) BindEQ(eq *EQ) error {
	if err := notOpen("fi_ep_bind(eq)", e, eq); err != nil {
		return err
	}
	return opErr("fi_ep_bind(eq)", C.netio_ep_bind(e.c, &eq.c.fid, 0))
}

// BindCQ binds a completion queue for the operations named by flags
// (BindTransmit, BindRecv or both).
func (e *Endpoint) BindCQ(cq *CQ, flags uint64) error {
	if err := notOpen("fi_ep_bind(cq)", e, cq); err != nil {
		return err
	}
	if err := opErr("fi_ep_bind(cq)", C.netio_ep_bind(e.c, &cq.c.fid, C.uint64_t(flags))); err != nil {
		return err
	}
	if flags&BindRecv != 0 {
		e.rcq = cq
	}
	e.countBinding(cq)
	return nil
}

// countBinding adds cq to the queues e holds bound, once per queue, so that
// the queue's Close refuses until e has closed.
func (e *Endpoint) countBinding(cq *CQ) {
	for i, b := range e.cqs {
		if b == cq {
			return
		}
		if b == nil {
			cq.closeMu.Lock()
			cq.bound++
			cq.closeMu.Unlock()
			e.cqs[i] = cq
			return
		}
	}
}

// releaseBindings uncounts e from the queues it held bound, after its
// fi_close succeeded. held is the queue whose closeMu the caller holds.
func (e *Endpoint) releaseBindings(held *CQ) {
	for i, q := range e.cqs {
		if q == nil {
			continue
		}
		if q != held {
			q.closeMu.Lock()
		}
		q.bound--
		if q != held {
			q.closeMu.Unlock()
		}
		e.cqs[i] = nil
	}
}

// Enable enables the endpoint; receives may be posted after it.
func (e *Endpoint) Enable() error {
	if err := notOpen("fi_enable", e); err != nil {
		return err
	}
	return opErr("fi_enable", C.netio_ep_enable(e.c))
}

// Connect starts connecting to info's destination address. The outcome is
// an EventConnected or an error event on the bound EQ.
func (e *Endpoint) Connect(info *Info) error {
	if err := notOpen("fi_connect", e, info); err != nil {
		return err
	}
	return opErr("fi_connect", C.netio_connect(e.c, info.c))
}

// Accept accepts the connection request the endpoint was opened for.
func (e *Endpoint) Accept() error {
	if err := notOpen("fi_accept", e); err != nil {
		return err
	}
	return opErr("fi_accept", C.netio_accept(e.c))
}

// Shutdown shuts the connection down; the peer gets an EventShutdown.
func (e *Endpoint) Shutdown() error {
	if err := notOpen("fi_shutdown", e); err != nil {
		return err
	}
	return opErr("fi_shutdown", C.netio_shutdown(e.c))
}

// Addr returns the local address as "ip:port".
func (e *Endpoint) Addr() (string, error) {
	if err := notOpen("fi_getname", e); err != nil {
		return "", err
	}
	return getName(&e.c.fid)
}

// Close closes the endpoint. First, whatever fi_close then says, it drops
// the receives queued for it with CQ.QueueRecv that no read has posted yet:
// they were never posted, so their memory is the caller's again even when
// the close fails and the endpoint stays open (a caller that logs the
// failure and frees the memory must not have a later read post it). It is
// safe to call more than once, and beside the Close of the queue bound for
// its receives: the two take turns, and the queue refuses to close until
// this Close has succeeded (see CQ.Close: libfabric 1.17's tcp frees a
// queue's memory when it refuses to close it).
func (e *Endpoint) Close() error {
	if !e.open() {
		return nil
	}
	q := e.rcq
	if q != nil {
		q.closeMu.Lock()
		defer q.closeMu.Unlock()
		q.dropQueued(e)
	}
	if err := opErr("fi_close(ep)", C.netio_close(&e.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	e.releaseBindings(q)
	e.releaseCounter()
	e.c, e.rcq = nil, nil
	return nil
}

// Send posts one message of length bytes at addr (registered memory with
// descriptor desc). ctx comes back in the completion.
func (e *Endpoint) Send(addr uintptr, length int, desc uintptr, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_send(e.h(), C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc), C.uint64_t(ctx)))
}

// IOVec is one piece of a scatter-gather send; its layout matches struct
// iovec.
type IOVec struct {
	Base uintptr
	Len  uint64
}

// Sendv posts one message made of the pieces in iov, whose descriptors are
// in desc (same length). The slices may live on the Go heap: they hold
// addresses, not Go pointers, and are read before Sendv returns.
func (e *Endpoint) Sendv(iov []IOVec, desc []uintptr, ctx uint64) Errno {
	if !e.open() {
		return EBADF
	}
	if len(iov) == 0 || len(desc) != len(iov) {
		return EINVAL
	}
	return errnoOfSize(C.netio_sendv(e.c, (*C.struct_iovec)(unsafe.Pointer(&iov[0])),
		(*C.uintptr_t)(unsafe.Pointer(&desc[0])), C.size_t(len(iov)), C.uint64_t(ctx)))
}

// Inject sends a small message (up to InjectSize, else EINVAL) that is
// copied before the call returns; it generates no completion.
func (e *Endpoint) Inject(b []byte) Errno {
	if errno := e.injectable(b); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_inject(e.c, firstByte(b), C.size_t(len(b))))
}

// Recv posts one receive buffer of length bytes at addr.
func (e *Endpoint) Recv(addr uintptr, length int, desc uintptr, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_recv(e.h(), C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc), C.uint64_t(ctx)))
}

// RecvBatch posts len(addrs) receive buffers in one call, each but the last
// with FI_MORE. It returns how many were posted; errno is set when none
// could be. Post the rest with another call: FI_MORE promises that more
// posts follow, and the last of them must come without it.
func (e *Endpoint) RecvBatch(addrs []uintptr, lens []uint64, descs []uintptr, ctxs []uint64) (int, Errno) {
	if !e.open() {
		return 0, EBADF
	}
	n := len(addrs)
	if n == 0 {
		return 0, 0
	}
	if len(lens) != n || len(descs) != n || len(ctxs) != n {
		return 0, EINVAL
	}
	rc := C.netio_recv_batch(e.c, (*C.uintptr_t)(unsafe.Pointer(&addrs[0])), (*C.uint64_t)(unsafe.Pointer(&lens[0])),
		(*C.uintptr_t)(unsafe.Pointer(&descs[0])), (*C.uint64_t)(unsafe.Pointer(&ctxs[0])), C.size_t(n))
	if rc < 0 {
		return 0, errnoOfSize(rc)
	}
	return int(rc), 0
}

// Read posts an RMA read (fi_read): length bytes of the peer's region at
// remoteAddr (an offset or a virtual address, as Info.MRVirtAddr says),
// accessed with key, land at addr (registered memory with descriptor desc).
// ctx comes back in the completion, whose flags carry FlagRead.
func (e *Endpoint) Read(addr uintptr, length int, desc uintptr, remoteAddr, key, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_read(e.c, C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc),
		C.uint64_t(remoteAddr), C.uint64_t(key), C.uint64_t(ctx)))
}

// Write posts an RMA write (fi_writemsg) of length bytes at addr into the
// peer's region at remoteAddr, accessed with key. ctx comes back in the
// completion, whose flags carry FlagWrite.
func (e *Endpoint) Write(addr uintptr, length int, desc uintptr, remoteAddr, key, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_write(e.c, C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc),
		C.uint64_t(remoteAddr), C.uint64_t(key), C.uint64_t(ctx)))
}

// check is the hot-path guard of the one-buffer posts: EBADF on a closed
// endpoint, EINVAL for a negative length, which libfabric would take as a
// huge size_t and read or write far past the buffer.
func (e *Endpoint) check(length int) Errno {
	switch {
	case !e.open():
		return EBADF
	case length < 0:
		return EINVAL
	}
	return 0
}

// firstByte returns b's first byte for a call into C, nil when b is empty.
func firstByte(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}
