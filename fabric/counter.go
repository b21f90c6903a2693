package fabric

/*
#include "shim.h"
*/
import "C"

import "sync"

// BindSelective, added to BindTransmit in Endpoint.BindCQ, makes the
// endpoint's sends write a completion only when they ask for one
// (FI_SELECTIVE_COMPLETION): SendCompletion does, InjectCounted does not.
// Plain Send and Inject then write none, unless the entry's tx_attr
// op_flags ask for FI_COMPLETION (they do not on tcp and sockets here).
const BindSelective = uint64(C.FI_SELECTIVE_COMPLETION)

// Counter is a completion counter (fi_cntr_open, FI_CNTR_EVENTS_COMP,
// asked for without a wait object; tcp in libfabric 1.17 gives it a
// pollfd wait object all the same, tcpx_cntr_open, which the library
// never waits on: it only reads). Bound to an endpoint's sends (BindCounter) it
// counts every send that has left the provider, those without a
// completion too (InjectCounted), and the failed ones apart (ReadErr).
type Counter struct {
	c *C.struct_fid_cntr
	// mu guards bound: the open endpoints bound to the counter. Close
	// refuses with EBUSY while one is, without calling fi_close (as CQ).
	mu    sync.Mutex
	bound int
}

func (c *Counter) open() bool { return c != nil && c.c != nil }

// OpenCounter opens a completion counter on the domain.
func (d *Domain) OpenCounter() (*Counter, error) {
	if err := notOpen("fi_cntr_open", d); err != nil {
		return nil, err
	}
	var c *C.struct_fid_cntr
	if err := opErr("fi_cntr_open", C.netio_cntr_open(d.c, &c)); err != nil {
		return nil, err
	}
	return &Counter{c: c}, nil
}

// Read returns how many operations counted have completed successfully; 0
// on a closed counter. On some providers (tcp) it also makes progress.
func (c *Counter) Read() uint64 {
	if !c.open() {
		return 0
	}
	return uint64(C.netio_cntr_read(c.c))
}

// ReadErr returns how many operations counted have failed; 0 on a closed
// counter.
func (c *Counter) ReadErr() uint64 {
	if !c.open() {
		return 0
	}
	return uint64(C.netio_cntr_readerr(c.c))
}

// Close closes the counter; it refuses with EBUSY while an endpoint bound
// to it is open. Closing twice is harmless.
func (c *Counter) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open() {
		return nil
	}
	if c.bound > 0 {
		return &OpError{Op: "fi_close(cntr)", Err: EBUSY}
	}
	if err := opErr("fi_close(cntr)", C.netio_close(&c.c.fid)); err != nil {
		return err
	}
	c.c = nil
	return nil
}

// BindCounter binds c to count the endpoint's sends (FI_SEND), before
// Enable; one counter per endpoint.
func (e *Endpoint) BindCounter(c *Counter) error {
	if err := notOpen("fi_ep_bind(cntr)", e, c); err != nil {
		return err
	}
	if e.cntr != nil {
		return &OpError{Op: "fi_ep_bind(cntr)", Err: EINVAL}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := opErr("fi_ep_bind(cntr)", C.netio_ep_bind(e.c, &c.c.fid, C.FI_SEND)); err != nil {
		return err
	}
	c.bound++
	e.cntr = c
	return nil
}

// releaseCounter uncounts e from its counter after its fi_close.
func (e *Endpoint) releaseCounter() {
	if c := e.cntr; c != nil {
		c.mu.Lock()
		c.bound--
		c.mu.Unlock()
		e.cntr = nil
	}
}

// InjectCounted sends b like Inject (copied before it returns, no
// completion on an endpoint bound with BindSelective) with fi_sendmsg and
// FI_INJECT, which a bound Counter counts once sent: tcp in libfabric 1.17
// counts no fi_inject. b is at most InjectSize, else EINVAL. ctx is the
// context of the error completion tcp writes for it when it discards it
// unsent (fi_close, a broken connection); tcp's own fi_inject writes none.
func (e *Endpoint) InjectCounted(b []byte, ctx uint64) Errno {
	if errno := e.injectable(b); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_inject_counted(e.c, firstByte(b), C.size_t(len(b)), C.uint64_t(ctx)))
}

// SendCompletion is Send with FI_COMPLETION asked explicitly (fi_sendmsg):
// the send completes on an endpoint bound with BindSelective.
func (e *Endpoint) SendCompletion(addr uintptr, length int, desc uintptr, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_send_completion(e.h(), C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc), C.uint64_t(ctx)))
}
