package fabric

/*
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
*/
import "C"

import (
	"errors"
	"syscall"
)

// Errno is a positive libfabric error number (FI_E*). The value 0 means
// success; hot-path calls return an Errno so that they never allocate.
type Errno int

// Error numbers the library acts on. Numbers below 256 are the system's errno
// values; the rest are libfabric's own.
const (
	EAGAIN       = Errno(C.FI_EAGAIN)
	EINTR        = Errno(C.FI_EINTR)
	EINVAL       = Errno(C.FI_EINVAL)
	ENOMEM       = Errno(C.FI_ENOMEM)
	ENODATA      = Errno(C.FI_ENODATA)
	ECONNREFUSED = Errno(C.FI_ECONNREFUSED)
	ECONNRESET   = Errno(C.FI_ECONNRESET)
	ECONNABORTED = Errno(C.FI_ECONNABORTED)
	ENOTCONN     = Errno(C.FI_ENOTCONN)
	ESHUTDOWN    = Errno(C.FI_ESHUTDOWN)
	ETIMEDOUT    = Errno(C.FI_ETIMEDOUT)
	ECANCELED    = Errno(C.FI_ECANCELED)
	EHOSTUNREACH = Errno(C.FI_EHOSTUNREACH)
	EMSGSIZE     = Errno(C.FI_EMSGSIZE)
	ENOSYS       = Errno(C.FI_ENOSYS)
	EOPNOTSUPP   = Errno(C.FI_EOPNOTSUPP)
	EAVAIL       = Errno(C.FI_EAVAIL)
	ETRUNC       = Errno(C.FI_ETRUNC)
	ENOKEY       = Errno(C.FI_ENOKEY)
	EACCES       = Errno(C.FI_EACCES)
	EBUSY        = Errno(C.FI_EBUSY)
)

// errnoOf turns a libfabric return code (0 or a negative FI_E* value) into an
// Errno.
func errnoOf(rc C.int) Errno {
	if rc < 0 {
		return Errno(-rc)
	}
	return 0
}

func errnoOfSize(rc C.ssize_t) Errno {
	if rc < 0 {
		return Errno(-rc)
	}
	return 0
}

// Error returns libfabric's text for the number (fi_strerror).
func (e Errno) Error() string {
	if e == 0 {
		return "success"
	}
	return C.GoString(C.fi_strerror(C.int(e)))
}

// Is makes errors.Is(err, syscall.ECONNREFUSED) and the like work for the
// numbers libfabric shares with the system.
func (e Errno) Is(target error) bool {
	var se syscall.Errno
	if errors.As(target, &se) {
		return int(se) == int(e)
	}
	return false
}

// Temporary reports whether retrying the same call later may succeed.
func (e Errno) Temporary() bool { return e == EAGAIN || e == EINTR }

// OpError records the libfabric call that failed and why.
type OpError struct {
	Op  string // the libfabric call, e.g. "fi_connect"
	Err error  // an Errno, or a more specific error
}

// Error returns "fabric: <call>: <reason>".
func (e *OpError) Error() string { return "fabric: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// opErr returns nil for success and an *OpError otherwise.
func opErr(op string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &OpError{Op: op, Err: errnoOf(rc)}
}
