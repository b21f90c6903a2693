package fabric

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"unsafe"
)

// Fabric is an open fabric (fi_fabric).
type Fabric struct {
	c    *C.struct_fid_fabric
	prov string // the provider's name, from the info it was opened with
}

// OpenFabric opens the fabric that info names.
func OpenFabric(info *Info) (*Fabric, error) {
	if err := notOpen("fi_fabric", info); err != nil {
		return nil, err
	}
	var f *C.struct_fid_fabric
	if err := opErr("fi_fabric", C.netio_fabric(info.c, &f)); err != nil {
		return nil, err
	}
	return &Fabric{c: f, prov: info.Provider()}, nil
}

// Close closes the fabric. Everything opened from it must be closed first.
func (f *Fabric) Close() error {
	if !f.open() {
		return nil
	}
	if err := opErr("fi_close(fabric)", C.netio_close(&f.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	f.c = nil
	return nil
}

// TryWait reports whether the caller may block on the wait file descriptors
// of a (and b, when not nil): fi_trywait. False means completions or events
// may already be pending, so the caller must read before blocking; it is
// also the answer when f, a or b is closed (or a is nil), whose reads then
// report the error, and when a or b has no wait file descriptor (opened
// without one), which can only be polled.
func (f *Fabric) TryWait(a, b Waitable) bool {
	if !f.open() || a == nil || !a.open() || !a.hasWait() || b != nil && (!b.open() || !b.hasWait()) {
		return false
	}
	var fb *C.struct_fid
	if b != nil {
		fb = b.fid()
	}
	return C.netio_trywait(f.c, a.fid(), fb) == 0
}

// Waitable is an object with a wait file descriptor: a CQ or an EQ.
type Waitable interface {
	object
	fid() *C.struct_fid
	hasWait() bool // opened with a wait file descriptor
	// WaitFD returns the file descriptor that becomes readable when the
	// object may have something to read (FI_GETWAIT).
	WaitFD() (int, error)
}

func waitFD(q Waitable, op string) (int, error) {
	if err := notOpen(op, q); err != nil {
		return -1, err
	}
	if !q.hasWait() {
		// libfabric 1.17's tcp dereferences the missing wait set.
		return -1, &OpError{Op: op, Err: ENODATA}
	}
	fid := q.fid()
	var fd C.int
	if err := opErr(op, C.netio_getwait(fid, &fd)); err != nil {
		return -1, err
	}
	return int(fd), nil
}

// Domain is an open domain (fi_domain).
type Domain struct {
	c *C.struct_fid_domain
}

// OpenDomain opens the domain that info names on the fabric.
func (f *Fabric) OpenDomain(info *Info) (*Domain, error) {
	if err := notOpen("fi_domain", f, info); err != nil {
		return nil, err
	}
	var d *C.struct_fid_domain
	if err := opErr("fi_domain", C.netio_domain(f.c, info.c, &d)); err != nil {
		return nil, err
	}
	return &Domain{c: d}, nil
}

// Close closes the domain. Endpoints, CQs and registrations must be closed
// first.
func (d *Domain) Close() error {
	if !d.open() {
		return nil
	}
	if err := opErr("fi_close(domain)", C.netio_close(&d.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	d.c = nil
	return nil
}

// MR is a memory registration (fi_mr_reg).
type MR struct {
	c    *C.struct_fid_mr
	desc uintptr
	key  uint64
}

// RegisterMemory registers length bytes at addr with the given access flags
// (AccessSend, AccessRecv, ...). requestedKey must be unique in the domain
// when the provider does not choose keys itself. The memory must stay mapped
// and in place until the registration is closed. A nil address, a length
// that is not positive or wraps around the address space, and access that
// is empty or has other bits are refused with EINVAL: tcp and sockets would
// register them.
func (d *Domain) RegisterMemory(addr uintptr, length int, access, requestedKey uint64) (*MR, error) {
	if err := notOpen("fi_mr_reg", d); err != nil {
		return nil, err
	}
	if addr == 0 || length <= 0 || addr+uintptr(length) < addr || access == 0 || access&^accessMask != 0 {
		return nil, invalid("fi_mr_reg")
	}
	var mr *C.struct_fid_mr
	rc := C.netio_mr_reg(d.c, C.uintptr_t(addr), C.size_t(length), C.uint64_t(access), C.uint64_t(requestedKey), &mr)
	if err := opErr("fi_mr_reg", rc); err != nil {
		return nil, err
	}
	return &MR{c: mr, desc: uintptr(C.netio_mr_desc(mr)), key: uint64(C.netio_mr_key(mr))}, nil
}

// Desc returns the local descriptor to pass with sends and receives.
func (m *MR) Desc() uintptr { return m.desc }

// Key returns the remote access key.
func (m *MR) Key() uint64 { return m.key }

// Close deregisters the memory. It is safe to call more than once.
func (m *MR) Close() error {
	if m == nil || m.c == nil {
		return nil
	}
	if err := opErr("fi_close(mr)", C.netio_close(&m.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	m.c = nil
	return nil
}

// EQ is an event queue for connection management events (fi_eq_open). Its
// entry lives in C memory so that an empty Read does not allocate.
type EQ struct {
	c     *C.struct_fid_eq
	entry *C.struct_netio_event
	waits bool   // opened with a wait file descriptor
	prov  string // the fabric's provider, for connection requests that name none
}

// OpenEQ opens an event queue of the given size. With waitFD the queue has a
// file descriptor (FI_WAIT_FD) that WaitFD returns.
func (f *Fabric) OpenEQ(size int, waitFD bool) (*EQ, error) {
	if err := notOpen("fi_eq_open", f); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, invalid("fi_eq_open")
	}
	var q *C.struct_fid_eq
	if err := opErr("fi_eq_open", C.netio_eq_open(f.c, C.size_t(size), cbool(waitFD), &q)); err != nil {
		return nil, err
	}
	entry := (*C.struct_netio_event)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_netio_event{}))))
	if entry == nil {
		C.netio_close(&q.fid)
		return nil, &OpError{Op: "calloc(eq entry)", Err: ENOMEM}
	}
	return &EQ{c: q, entry: entry, waits: waitFD, prov: f.prov}, nil
}

func (q *EQ) fid() *C.struct_fid { return &q.c.fid }
func (q *EQ) hasWait() bool      { return q.waits }

// WaitFD returns the queue's wait file descriptor; a queue opened without
// one gives ENODATA.
func (q *EQ) WaitFD() (int, error) { return waitFD(q, "fi_control(eq, FI_GETWAIT)") }

// EventKind names a connection management event.
type EventKind uint32

// Event kinds. EventError is an error entry (fi_eq_readerr).
const (
	EventError     EventKind = 0
	EventConnReq   EventKind = EventKind(C.FI_CONNREQ)
	EventConnected EventKind = EventKind(C.FI_CONNECTED)
	EventShutdown  EventKind = EventKind(C.FI_SHUTDOWN)
)

// String names the event kind, e.g. "connected".
func (k EventKind) String() string {
	switch k {
	case EventError:
		return "error"
	case EventConnReq:
		return "connection request"
	case EventConnected:
		return "connected"
	case EventShutdown:
		return "shutdown"
	}
	return "event " + strconv.FormatUint(uint64(k), 10)
}

// Event is one entry read from an EQ.
type Event struct {
	Kind EventKind
	// Context is the context of the endpoint (or passive endpoint) the event
	// is about, as given when it was opened.
	Context uint64
	// Info is the new connection's description for EventConnReq; the
	// receiver owns it and must Free it. It names its provider on every
	// provider: Read fills in the fabric's where the provider left none
	// (sockets).
	Info *Info
	// Err is the error for EventError: an *OpError wrapping the Errno, with
	// the provider's text.
	Err error
}

// nameProvider gives a connection request's info the fabric's provider
// name when the provider left it empty (sockets in libfabric 1.17 builds
// that info from its own attributes, without prov_name), so that
// Info.Provider of an accepted connection says its provider on every
// provider. Without memory for the copy it stays empty.
func (q *EQ) nameProvider(info *Info) {
	if q.prov == "" || info.attrs().fabric_attr == nil || info.attrs().fabric_attr.prov_name != nil {
		return
	}
	name := C.CString(q.prov)
	C.netio_info_set_prov(info.c, name)
	C.free(unsafe.Pointer(name))
}

// Read reads one event without blocking. ok is false when none is pending.
func (q *EQ) Read() (ev Event, ok bool, err error) {
	if err := notOpen("fi_eq_read", q); err != nil {
		return Event{}, false, err
	}
	rc := C.netio_eq_read(q.c, q.entry)
	if rc == -C.FI_EAGAIN {
		return Event{}, false, nil
	}
	if rc < 0 {
		return Event{}, false, &OpError{Op: "fi_eq_read", Err: errnoOfSize(rc)}
	}
	ce := q.entry
	ev = Event{Kind: EventKind(ce.event), Context: uint64(ce.context)}
	if ce.info != nil {
		ev.Info = &Info{c: ce.info}
		q.nameProvider(ev.Info)
	}
	if ev.Kind == EventError {
		pe := &ProviderError{Errno: Errno(ce.err), ProvErrno: int(ce.prov_errno)}
		if pe.ProvErrno != 0 {
			pe.Text = C.GoString(C.netio_eq_strerror(q.c, ce.prov_errno))
		}
		ev.Err = pe
	}
	return ev, true, nil
}

// ProviderError is an error entry from an EQ or CQ: the libfabric error and
// the provider's own number and text.
type ProviderError struct {
	Errno     Errno
	ProvErrno int
	Text      string
}

// Error returns libfabric's text, with the provider's own when it adds
// something.
func (e *ProviderError) Error() string {
	if e.Text == "" || e.Text == e.Errno.Error() {
		return e.Errno.Error()
	}
	return e.Errno.Error() + " (provider: " + e.Text + ")"
}

// Unwrap returns the Errno, so errors.Is(err, fabric.ECONNREFUSED) works.
func (e *ProviderError) Unwrap() error { return e.Errno }

// Close closes the queue. It is safe to call more than once.
func (q *EQ) Close() error {
	if !q.open() {
		return nil
	}
	if err := opErr("fi_close(eq)", C.netio_close(&q.c.fid)); err != nil {
		return err // still open: close what uses it first, then retry
	}
	C.free(unsafe.Pointer(q.entry))
	q.c, q.entry = nil, nil
	return nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
