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

// RxMCompPerProgressEnv is the libfabric setting that bounds how many
// completions of its connections' queues ofi_rxm handles in one progress
// call, that is in one read of an rdm endpoint's completion queue
// (FI_OFI_RXM_COMP_PER_PROGRESS; libfabric's default is 1, and rxm bounds
// it by half its connections' queue sizes).
//
// At 1, a message that takes several inner completions (a rendezvous:
// request, read, acknowledgement) takes as many reads of the queue, each a
// call into C and a poll of the provider's sockets; a reader that keeps up
// pays them once per completion. Unless the process's environment already
// names it, the package sets it to "64" before its first call into
// libfabric, as it does for TCPStagingEnv; measured in
// docs/performance.md (fewer context switches and less CPU per byte at
// 4 KiB, 64 KiB and 1 MiB). Completions rxm cannot fit in the queue wait in
// its overflow list, as they did before.
const RxMCompPerProgressEnv = "FI_OFI_RXM_COMP_PER_PROGRESS"

// SocketsBufSizeEnv is the libfabric setting that fixes the sockets
// provider's socket send and receive buffer sizes (FI_SOCKETS_MAX_BUF_SZ,
// SO_SNDBUF and SO_RCVBUF; libfabric's default 0 leaves them to the
// kernel, whose receive buffer starts at tcp_rmem's default, 128 KiB, and
// grows only for a reader that keeps up).
//
// libfabric 1.17's sockets provider reads a message's 24-byte header with
// MSG_PEEK and takes nothing off the socket until all 24 bytes are there.
// A receiver that fell behind can be left with the first bytes of a header
// in a buffer whose kernel memory is all but used up (docs/providers.md,
// sockets): the kernel advertises a zero window, the rest of the header
// never comes, and the connection stalls for ever, the receiver's progress
// thread peeking and the sender's data queued (fabric's
// TestInjectRunToRefusedMidRun on sockets under CPU load). Linux opens the
// window while at least half the buffer is free, so a buffer far larger
// than what a few waiting bytes are charged keeps it open.
//
// Unless the process's environment already names it, the package sets it
// to "4194304" (the kernel doubles it, bounded by net.core.rmem_max and
// wmem_max) before its first call into libfabric, as it does for
// TCPStagingEnv. sockets applies it to its listening socket, so it covers
// what the accepting side of a connection receives (the peer a sender
// connects to); the connecting side keeps the kernel's buffer. The memory
// is the kernel's, taken only while data waits.
const SocketsBufSizeEnv = "FI_SOCKETS_MAX_BUF_SZ"

// providerDefaults are the libfabric settings the package applies before
// its first GetInfo unless the environment names them.
var providerDefaults = []struct{ name, value string }{
	{TCPStagingEnv, "0"},
	{RxMCompPerProgressEnv, "64"},
	{SocketsBufSizeEnv, "4194304"},
}

var defaultsOnce sync.Once

// applyProviderDefaults sets providerDefaults that the environment does
// not name. os.Setenv reaches C's environ in a cgo program (the runtime
// calls setenv), where libfabric reads it.
func applyProviderDefaults() {
	defaultsOnce.Do(func() {
		for _, d := range providerDefaults {
			if _, set := os.LookupEnv(d.name); !set {
				_ = os.Setenv(d.name, d.value)
			}
		}
	})
}

// TCPStaging returns the staging buffer size libfabric's tcp provider
// reads from the C environment (see TCPStagingEnv), after the package's
// default has been applied: "0" unless the program named its own.
func TCPStaging() string { return providerSetting(TCPStagingEnv) }

// RxMCompPerProgress returns the completions per progress call ofi_rxm
// reads from the C environment (see RxMCompPerProgressEnv), after the
// package's default has been applied: "64" unless the program named its
// own.
func RxMCompPerProgress() string { return providerSetting(RxMCompPerProgressEnv) }

// SocketsBufSize returns the socket buffer size libfabric's sockets
// provider reads from the C environment (see SocketsBufSizeEnv), after the
// package's default has been applied: "4194304" unless the program named
// its own.
func SocketsBufSize() string { return providerSetting(SocketsBufSizeEnv) }

// providerSetting returns name's value in the C environment once the
// package's defaults are applied, "" when it is unset.
func providerSetting(name string) string {
	applyProviderDefaults()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if v := C.getenv(cname); v != nil {
		return C.GoString(v)
	}
	return ""
}
