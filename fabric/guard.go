package fabric

/*
#include "shim.h"
*/
import "C"

import "sync"

// EBADF is the Errno of a call on, or with, an object that is nil, closed
// or freed: like a system call on a closed file descriptor, it is refused
// before libfabric is reached, where a NULL fid would crash the process.
const EBADF = Errno(C.FI_EBADF)

// object is a libfabric object with a Go handle. open is false for a nil
// handle and for one that was closed or freed.
type object interface{ open() bool }

func (i *Info) open() bool            { return i != nil && i.c != nil }
func (f *Fabric) open() bool          { return f != nil && f.c != nil }
func (d *Domain) open() bool          { return d != nil && d.c != nil }
func (q *EQ) open() bool              { return q != nil && q.c != nil }
func (q *CQ) open() bool              { return q != nil && q.c != nil }
func (p *PassiveEndpoint) open() bool { return p != nil && p.c != nil }
func (e *Endpoint) open() bool        { return e != nil && e.c != nil }

// notOpen returns an *OpError wrapping EBADF when one of objs is not open,
// and nil when all are. Setup calls check their receiver and arguments
// with it; hot-path calls check their receiver and return EBADF.
func notOpen(op string, objs ...object) error {
	for _, o := range objs {
		if !o.open() {
			return &OpError{Op: op, Err: EBADF}
		}
	}
	return nil
}

// invalid returns an *OpError wrapping EINVAL for arguments that libfabric
// would accept and misuse (a negative size becomes a huge size_t).
func invalid(op string) error { return &OpError{Op: op, Err: EINVAL} }

// accessMask is every access flag RegisterMemory knows.
const accessMask = AccessSend | AccessRecv | AccessRead | AccessWrite | AccessRemoteRead | AccessRemoteWrite

// emptyInfo is a zeroed fi_info with every attribute present (what
// fi_allocinfo returns). The accessors of a nil or freed Info read it, so
// they return zero values instead of dereferencing NULL. It lives as long
// as the process.
var emptyInfo = sync.OnceValue(func() *C.struct_fi_info { return C.fi_dupinfo(nil) })

// attrs returns the fi_info the accessors read.
func (i *Info) attrs() *C.struct_fi_info {
	if !i.open() {
		return emptyInfo()
	}
	return i.c
}
