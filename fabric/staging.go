package fabric

/*
#include <stdlib.h>
*/
import "C"

import (
	"os"
	"sync"
	"unsafe"
)

// TCPStagingEnv is the libfabric setting that sizes the tcp provider's
// send staging buffer (FI_TCP_STAGING_SBUF_SIZE; libfabric's default is
// 9000 bytes).
//
// libfabric 1.17's tcp provider (and so tcp;ofi_rxm, whose connections are
// tcp endpoints) copies a send into that buffer when the socket is full
// and reports it complete, and fi_close of the endpoint discards what the
// buffer still holds (ofi_bsock_discard): a sender told OK that then
// closes loses up to the buffer's size of messages silently. With the
// buffer at 0 a send the socket refuses stays queued in the provider,
// uncompleted, until the kernel has all of it, and fi_close reports it
// canceled instead.
//
// Unless the process's environment already names it, the package sets it
// to "0" before its first call into libfabric (GetInfo), which is when
// libfabric reads it: providers are initialised once per process. A
// program that wants the staging back (it saves a system call per message
// when a receiver is behind, at the price above) sets the variable itself
// before it starts, or with os.Setenv before the first GetInfo, and
// TCPStaging then returns its value.
const TCPStagingEnv = "FI_TCP_STAGING_SBUF_SIZE"

var stagingOnce sync.Once

// defaultTCPStaging turns the tcp staging buffer off unless the
// environment names a size. os.Setenv reaches C's environ in a cgo
// program (the runtime calls setenv), where libfabric reads it.
func defaultTCPStaging() {
	stagingOnce.Do(func() {
		if _, set := os.LookupEnv(TCPStagingEnv); !set {
			_ = os.Setenv(TCPStagingEnv, "0")
		}
	})
}

// TCPStaging returns the staging buffer size libfabric's tcp provider
// reads from the C environment (see TCPStagingEnv), after the package's
// default has been applied: "0" unless the program named its own.
func TCPStaging() string {
	defaultTCPStaging()
	name := C.CString(TCPStagingEnv)
	defer C.free(unsafe.Pointer(name))
	if v := C.getenv(name); v != nil {
		return C.GoString(v)
	}
	return ""
}
