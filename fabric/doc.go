// Package fabric is netio-go's cgo boundary: thin Go types over libfabric's
// fi_info, fabric, domain, event queue, completion queue, passive and active
// endpoints and memory registrations. It is the only package that imports "C".
//
// The package keeps two rules that the rest of netio-go relies on:
//
//   - No Go pointer is stored in C memory. Operation contexts are integer keys
//     (cast to void* in C) and memory handed to the provider is given as an
//     address (uintptr) of memory the caller keeps alive and in place: mmap'd
//     regions, or Go memory pinned with runtime.Pinner.
//   - Hot-path calls (Send, Recv, CQ.Read) return an Errno, an integer, so
//     they never allocate. Setup calls return errors built from Errno and the
//     operation name, matchable with errors.Is.
//
// Objects are not safe for concurrent Close; the packages above serialize
// their lifetime. Data-path calls on an endpoint are safe for concurrent use
// because domains are opened with FI_THREAD_SAFE.
//
// A call on a nil or closed object, or with one as an argument, is refused
// with EBADF before it reaches libfabric, where a NULL fid would crash the
// process; sizes libfabric would misread (a negative length becomes a huge
// size_t) are refused with EINVAL.
package fabric
