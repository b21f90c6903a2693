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

// Addr is a peer's address in an address vector (fi_addr_t): a small
// number the provider hands out at insertion, valid until it is removed.
type Addr uint64

// Special addresses. libfabric gives both the same number.
const (
	// AddrUnspec receives from any peer.
	AddrUnspec = Addr(C.FI_ADDR_UNSPEC)
	// AddrNotAvail is a source the provider does not know.
	AddrNotAvail = Addr(C.FI_ADDR_NOTAVAIL)
)

// maxAddrLen bounds a raw endpoint name; libfabric's names here are
// sockaddrs or short strings (shm).
const maxAddrLen = 256

// AV is an address vector (fi_av_open): the table of peers a
// connectionless endpoint sends to and names receive sources by.
type AV struct {
	c *C.struct_fid_av
}

func (a *AV) open() bool { return a != nil && a.c != nil }

// OpenAV opens an address vector sized for count peers (a hint; 0 lets
// the provider choose).
func (d *Domain) OpenAV(count int) (*AV, error) {
	if err := notOpen("fi_av_open", d); err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, invalid("fi_av_open")
	}
	var av *C.struct_fid_av
	if err := opErr("fi_av_open", C.netio_av_open(d.c, C.size_t(count), &av)); err != nil {
		return nil, err
	}
	return &AV{c: av}, nil
}

// Insert inserts a raw endpoint name (from Endpoint.Name of the peer, in
// the provider's address format) and returns its address.
func (a *AV) Insert(name []byte) (Addr, error) {
	if err := notOpen("fi_av_insert", a); err != nil {
		return 0, err
	}
	if len(name) == 0 || len(name) > maxAddrLen {
		return 0, invalid("fi_av_insert")
	}
	// C memory: the provider may keep reading the buffer during the call
	// from another thread (no Go pointer crosses), and FI_ADDR_STR names
	// must end in NUL.
	buf := C.calloc(C.size_t(len(name)+1), 1)
	if buf == nil {
		return 0, &OpError{Op: "fi_av_insert", Err: ENOMEM}
	}
	defer C.free(buf)
	copy(unsafe.Slice((*byte)(buf), len(name)), name)
	var out C.uint64_t
	if err := opErr("fi_av_insert", C.netio_av_insert(a.c, buf, &out)); err != nil {
		return 0, err
	}
	return Addr(out), nil
}

// InsertService inserts the peer at node and service (host and port for
// the IP providers) and returns its address.
func (a *AV) InsertService(node, service string) (Addr, error) {
	if err := notOpen("fi_av_insertsvc", a); err != nil {
		return 0, err
	}
	cn, cs := C.CString(node), C.CString(service)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cs))
	var out C.uint64_t
	if err := opErr("fi_av_insertsvc", C.netio_av_insertsvc(a.c, cn, cs, &out)); err != nil {
		return 0, err
	}
	return Addr(out), nil
}

// Remove removes addr; the provider may hand the number out again.
func (a *AV) Remove(addr Addr) error {
	if err := notOpen("fi_av_remove", a); err != nil {
		return err
	}
	return opErr("fi_av_remove", C.netio_av_remove(a.c, C.uint64_t(addr)))
}

// Lookup returns the raw name stored for addr.
func (a *AV) Lookup(addr Addr) ([]byte, error) {
	if err := notOpen("fi_av_lookup", a); err != nil {
		return nil, err
	}
	var buf [maxAddrLen]byte
	n := C.size_t(len(buf))
	if err := opErr("fi_av_lookup", C.netio_av_lookup(a.c, C.uint64_t(addr), unsafe.Pointer(&buf[0]), &n)); err != nil {
		return nil, err
	}
	if int(n) > len(buf) {
		return nil, &OpError{Op: "fi_av_lookup", Err: Errno(C.FI_ETOOSMALL)}
	}
	return append([]byte(nil), buf[:n]...), nil
}

// String formats a raw name as the provider prints it (fi_av_straddr),
// for instance "fi_sockaddr_in://127.0.0.1:4000" or shm's name.
func (a *AV) String(name []byte) (string, error) {
	if err := notOpen("fi_av_straddr", a); err != nil {
		return "", err
	}
	if len(name) == 0 || len(name) > maxAddrLen {
		return "", invalid("fi_av_straddr")
	}
	in := C.calloc(C.size_t(len(name)+1), 1)
	if in == nil {
		return "", &OpError{Op: "fi_av_straddr", Err: ENOMEM}
	}
	defer C.free(in)
	copy(unsafe.Slice((*byte)(in), len(name)), name)
	var out [maxAddrLen]C.char
	if err := opErr("fi_av_straddr", C.netio_av_straddr(a.c, in, &out[0], C.size_t(len(out)))); err != nil {
		return "", err
	}
	return C.GoString(&out[0]), nil
}

// Close closes the address vector. Close the endpoints bound to it first.
// It is safe to call more than once.
func (a *AV) Close() error {
	if !a.open() {
		return nil
	}
	if err := opErr("fi_close(av)", C.netio_close(&a.c.fid)); err != nil {
		return err
	}
	a.c = nil
	return nil
}

// BindAV binds an address vector to a connectionless endpoint, before
// Enable.
func (e *Endpoint) BindAV(av *AV) error {
	if err := notOpen("fi_ep_bind(av)", e, av); err != nil {
		return err
	}
	return opErr("fi_ep_bind(av)", C.netio_ep_bind(e.c, &av.c.fid, 0))
}

// Name returns the endpoint's raw name (fi_getname) in the provider's
// address format, for a peer to Insert.
func (e *Endpoint) Name() ([]byte, error) {
	if err := notOpen("fi_getname", e); err != nil {
		return nil, err
	}
	var buf [maxAddrLen]byte
	n := C.size_t(len(buf))
	if err := opErr("fi_getname", C.netio_getname_raw(&e.c.fid, unsafe.Pointer(&buf[0]), &n)); err != nil {
		return nil, err
	}
	if int(n) > len(buf) {
		return nil, &OpError{Op: "fi_getname", Err: Errno(C.FI_ETOOSMALL)}
	}
	return append([]byte(nil), buf[:n]...), nil
}

// SendTo posts one message of length bytes at addr (registered memory with
// descriptor desc) to dest, on a connectionless endpoint.
func (e *Endpoint) SendTo(addr uintptr, length int, desc uintptr, dest Addr, ctx uint64) Errno {
	if errno := e.check(length); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_sendto(e.h(), C.uintptr_t(addr), C.size_t(length), C.uintptr_t(desc), C.uint64_t(dest), C.uint64_t(ctx)))
}

// SendvTo is Sendv to dest, on a connectionless endpoint.
func (e *Endpoint) SendvTo(iov []IOVec, desc []uintptr, dest Addr, ctx uint64) Errno {
	if !e.open() {
		return EBADF
	}
	if len(iov) == 0 || len(desc) != len(iov) {
		return EINVAL
	}
	return errnoOfSize(C.netio_sendvto(e.c, (*C.struct_iovec)(unsafe.Pointer(&iov[0])),
		(*C.uintptr_t)(unsafe.Pointer(&desc[0])), C.size_t(len(iov)), C.uint64_t(dest), C.uint64_t(ctx)))
}

// InjectTo is Inject to dest, on a connectionless endpoint: b (at most
// InjectSize, else EINVAL) is copied before the call returns and no
// completion is generated.
func (e *Endpoint) InjectTo(b []byte, dest Addr) Errno {
	if errno := e.injectable(b); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_injectto(e.c, firstByte(b), C.size_t(len(b)), C.uint64_t(dest)))
}

// InjectRunTo injects the messages mem[off[i]:off[i]+lens[i]] to dest in
// order, in one call into C, until the provider refuses one: it returns
// how many it took and that refusal's errno (0 when it took them all). It
// injects none and returns EBADF on an endpoint not open, and EINVAL when
// off and lens are empty or of different lengths, or a message is longer
// than InjectSize or ends past mem.
func (e *Endpoint) InjectRunTo(mem []byte, off, lens []uint32, dest Addr) (int, Errno) {
	if errno := e.injectable(nil); errno != 0 {
		return 0, errno
	}
	if len(off) != len(lens) || len(off) == 0 {
		return 0, EINVAL
	}
	for i, n := range lens {
		if int(n) > e.injectSize || uint64(off[i])+uint64(n) > uint64(len(mem)) {
			return 0, EINVAL
		}
	}
	r := C.netio_injectto_run(e.c, (*C.char)(firstByte(mem)), (*C.uint32_t)(unsafe.Pointer(&off[0])),
		(*C.uint32_t)(unsafe.Pointer(&lens[0])), C.size_t(len(off)), C.uint64_t(dest))
	return int(r >> 32), Errno(uint32(r))
}

// String names the address for logs.
func (a Addr) String() string {
	if a == AddrNotAvail { // the same number as AddrUnspec in libfabric
		return "unspec"
	}
	return "fi_addr(" + strconv.FormatUint(uint64(a), 10) + ")"
}
