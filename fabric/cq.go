package fabric

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"sync"
	"time"
	"unsafe"
)

// MaxBatch is the largest number of completions CQ.Read returns per call.
const MaxBatch = 64

// CQ is a completion queue (fi_cq_open, FI_CQ_FORMAT_MSG). Its entry buffer
// lives in C memory, so Read passes no Go pointer and does not allocate.
type CQ struct {
	c       *C.struct_fid_cq
	entries *[MaxBatch]C.struct_fi_cq_msg_entry
	srcs    *[MaxBatch]C.uint64_t      // each entry's source address (fi_cq_readfrom)
	dirty   int                        // srcs the last read filled, reset by the next
	waits   bool                       // opened with a wait file descriptor
	rq      *C.struct_netio_recv_queue // receives the next read posts (QueueRecv)
	// closeMu is taken by Close and by the Close of an endpoint bound to
	// the queue for receives, never by a read: such an endpoint may close
	// on another goroutine than the queue's (poll's Do once the poller has
	// stopped) while the queue closes, and the two must take turns (the
	// endpoint's drops its receives queued in rq, which the queue's close
	// frees).
	closeMu sync.Mutex
	// bound counts the open endpoints bound to the queue (under closeMu).
	// Close refuses with EBUSY while it is not zero without calling
	// fi_close: libfabric 1.17's tcp frees the queue's transfer pool before
	// it checks whether endpoints are still bound, so a refused fi_close
	// leaves them on freed memory and the later close frees it again.
	bound int
}

// Completion is one successful completion.
type Completion struct {
	Context uint64 // the integer key given when the operation was posted
	Flags   uint64 // FlagSend, FlagRecv, ...
	Len     uint64 // bytes received (receives only)
	// Source is the sender of a receive on a connectionless endpoint, as
	// its address in the endpoint's AV; AddrNotAvail when the provider
	// does not know it (not inserted, or no FI_SOURCE) and on connected
	// endpoints.
	Source Addr
}

// CompletionError is one error completion (fi_cq_readerr).
type CompletionError struct {
	Context   uint64
	Flags     uint64
	Len       uint64
	Errno     Errno
	ProvErrno int
}

// OpenCQ opens a completion queue with room for size entries. With waitFD it
// has a file descriptor (FI_WAIT_FD) that WaitFD returns; without, it can
// only be polled.
func (d *Domain) OpenCQ(size int, waitFD bool) (*CQ, error) {
	if err := notOpen("fi_cq_open", d); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, invalid("fi_cq_open")
	}
	var q *C.struct_fid_cq
	if err := opErr("fi_cq_open", C.netio_cq_open(d.c, C.size_t(size), cbool(waitFD), &q)); err != nil {
		return nil, err
	}
	buf := C.calloc(MaxBatch, C.size_t(unsafe.Sizeof(C.struct_fi_cq_msg_entry{})))
	srcs := C.calloc(MaxBatch, C.size_t(unsafe.Sizeof(C.uint64_t(0))))
	rq := C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_netio_recv_queue{})))
	if buf == nil || srcs == nil || rq == nil {
		C.free(buf)
		C.free(srcs)
		C.free(rq)
		C.netio_close(&q.fid)
		return nil, &OpError{Op: "calloc(cq entries)", Err: ENOMEM}
	}
	// Every source starts unknown: the first read resets them all.
	return &CQ{c: q, entries: (*[MaxBatch]C.struct_fi_cq_msg_entry)(buf), srcs: (*[MaxBatch]C.uint64_t)(srcs),
		dirty: MaxBatch, waits: waitFD, rq: (*C.struct_netio_recv_queue)(rq)}, nil
}

func (q *CQ) fid() *C.struct_fid { return &q.c.fid }

// h, entriesH and srcsH pass the queue and its C arrays to the hot-path
// shim functions as integers of their own C types, which cgo does not
// check (see NETIO_H in shim.h). Only C memory may pass through them,
// never Go memory: an integer keeps nothing alive or in place, so the Go
// garbage collector could move or free Go memory that C then writes.
func (q *CQ) h() C.netio_cq_h { return C.netio_cq_h{v: C.uintptr_t(uintptr(unsafe.Pointer(q.c)))} }
func (q *CQ) entriesH() C.netio_cq_entries_h {
	return C.netio_cq_entries_h{v: C.uintptr_t(uintptr(unsafe.Pointer(q.entries)))}
}
func (q *CQ) srcsH() C.netio_cq_srcs_h {
	return C.netio_cq_srcs_h{v: C.uintptr_t(uintptr(unsafe.Pointer(q.srcs)))}
}
func (q *CQ) rqH() C.netio_recv_queue_h {
	return C.netio_recv_queue_h{v: C.uintptr_t(uintptr(unsafe.Pointer(q.rq)))}
}
func (q *CQ) hasWait() bool { return q.waits }

// WaitFD returns the queue's wait file descriptor; a queue opened without
// one gives ENODATA.
func (q *CQ) WaitFD() (int, error) { return waitFD(q, "fi_control(cq, FI_GETWAIT)") }

// Read reads up to MaxBatch completions in one cgo call; Entry(i) returns
// them until the next Read. It first posts the receives queued with
// QueueRecv. avail is true when an error completion is waiting (read it
// with ReadError). errno is non-zero only when the queue itself failed, or
// is EBADF when it is closed.
func (q *CQ) Read() (n int, avail bool, errno Errno) {
	if !q.open() {
		return 0, false, EBADF
	}
	return q.result(C.netio_cq_read(q.h(), q.rqH(), q.entriesH(), q.srcsH(), MaxBatch, C.size_t(q.dirty)))
}

// ReadSpin is Read (queued receives posted first, once), repeated inside C
// while the queue is empty, for up to spin (0 or less: once). It returns
// like Read: as soon as there are completions or an error, else after spin
// with n == 0. A spinning poller uses it to pay one cgo call per slice of
// spinning instead of per poll.
// Keep spin well below 20 µs: when no P is idle, the Go runtime hands the
// P of a goroutine that stays in a cgo call longer than that to another
// thread.
func (q *CQ) ReadSpin(spin time.Duration) (n int, avail bool, errno Errno) {
	if !q.open() {
		return 0, false, EBADF
	}
	return q.result(C.netio_cq_read_spin(q.h(), q.rqH(), q.entriesH(), q.srcsH(), MaxBatch, C.size_t(q.dirty), C.int64_t(spin)))
}

// result turns fi_cq_read's return value into Read's results.
// The read reset the sources the previous one filled; dirty becomes what
// this one filled.
func (q *CQ) result(rc C.ssize_t) (n int, avail bool, errno Errno) {
	q.dirty = max(int(rc), 0)
	switch {
	case rc == -C.FI_EAGAIN:
		return 0, false, 0
	case rc == -C.FI_EAVAIL:
		return 0, true, 0
	case rc < 0:
		return 0, false, errnoOfSize(rc)
	}
	return int(rc), false, 0
}

// Entry returns completion i (0 <= i < n) of the last Read. An index
// outside the batch, or a closed queue, gives the zero Completion.
func (q *CQ) Entry(i int) Completion {
	if !q.open() || uint(i) >= MaxBatch {
		return Completion{}
	}
	e := &q.entries[i]
	return Completion{Context: uint64(uintptr(e.op_context)), Flags: uint64(e.flags), Len: uint64(e.len), Source: Addr(q.srcs[i])}
}

// ReadError reads one error completion. ok is false when none is waiting.
func (q *CQ) ReadError() (ce CompletionError, ok bool) {
	if !q.open() {
		return CompletionError{}, false
	}
	var e C.struct_netio_cq_err
	if C.netio_cq_readerr(q.c, &e) < 0 {
		return CompletionError{}, false
	}
	return CompletionError{
		Context:   uint64(e.context),
		Flags:     uint64(e.flags),
		Len:       uint64(e.len),
		Errno:     Errno(e.err),
		ProvErrno: int(e.prov_errno),
	}, true
}

// Close closes the queue and frees its entry buffer and its receive
// queue. It fails (EBUSY), without asking the provider, while an endpoint
// bound to it is open (see the bound field), and
// QueueRecv takes receives only for endpoints bound to it, whose Close
// drops them: so no queued receive is left to post. It is safe to call
// more than once, and beside the Close of such an endpoint (they take
// turns).
func (q *CQ) Close() error {
	if q == nil {
		return nil
	}
	q.closeMu.Lock()
	defer q.closeMu.Unlock()
	if !q.open() {
		return nil
	}
	if q.bound > 0 {
		return &OpError{Op: "fi_close(cq)", Err: EBUSY} // never asked: see bound
	}
	if err := opErr("fi_close(cq)", C.netio_close(&q.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	C.free(unsafe.Pointer(q.entries))
	C.free(unsafe.Pointer(q.srcs))
	C.free(unsafe.Pointer(q.rq))
	q.c, q.entries, q.srcs, q.rq = nil, nil, nil, nil
	return nil
}
