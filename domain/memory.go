package domain

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// Access says what a registration allows. Ask for the least that works:
// send buffers AccessSend, receive buffers AccessRecv.
type Access uint64

// Access flags, combinable with |.
const (
	AccessSend        = Access(fabric.AccessSend)
	AccessRecv        = Access(fabric.AccessRecv)
	AccessRead        = Access(fabric.AccessRead)
	AccessWrite       = Access(fabric.AccessWrite)
	AccessRemoteRead  = Access(fabric.AccessRemoteRead)
	AccessRemoteWrite = Access(fabric.AccessRemoteWrite)
)

// String names the flags, "send|recv" say, and "none" for no access.
func (a Access) String() string {
	var names []string
	for _, f := range []struct {
		bit  Access
		name string
	}{
		{AccessSend, "send"}, {AccessRecv, "recv"},
		{AccessRead, "read"}, {AccessWrite, "write"},
		{AccessRemoteRead, "remote-read"}, {AccessRemoteWrite, "remote-write"},
	} {
		if a&f.bit != 0 {
			names = append(names, f.name)
			a &^= f.bit
		}
	}
	if a != 0 {
		names = append(names, fmt.Sprintf("%#x", uint64(a)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Registration is one accounted memory registration. Close deregisters it
// and, when the Manager allocated the memory (Alloc), unmaps it.
type Registration struct {
	m      *Manager
	mr     *fabric.MR
	addr   uintptr
	length int
	access Access
	mapped []byte // memory to unmap after deregistration, if ours
}

// Register registers length bytes at addr with the given access. The memory
// must stay mapped and in place until the registration is closed; Go heap
// memory must be pinned for that span. Registering past a limit fails with
// an error wrapping netio.ErrNoResources and registers nothing.
func (m *Manager) Register(addr uintptr, length int, access Access) (*Registration, error) {
	if addr == 0 || length <= 0 {
		return nil, fmt.Errorf("%w: domain: register %d bytes at %#x", netio.ErrInvalidArgument, length, addr)
	}
	if access == 0 {
		return nil, fmt.Errorf("%w: domain: register with no access flags", netio.ErrInvalidArgument)
	}
	if err := m.reserve(length); err != nil {
		return nil, err
	}
	// From here until it is inserted in m.regs (or unreserved) the
	// registration is only in m.stats.Registrations, which is what Close
	// counts: fi_mr_reg below never runs beside fi_close(domain).
	m.unlocked()
	mr, err := m.dom.RegisterMemory(addr, length, uint64(access), m.nextKey.Add(1))
	if err != nil {
		m.unreserve(nil, length)
		return nil, fmt.Errorf("domain: register %d bytes: %w", length, err)
	}
	r := &Registration{m: m, mr: mr, addr: addr, length: length, access: access}
	m.mu.Lock()
	m.regs[r] = struct{}{}
	m.mu.Unlock()
	return r, nil
}

// reserve accounts one registration of length bytes, or fails without
// changing anything when a limit would be passed or the Manager is closed.
func (m *Manager) reserve(length int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &m.stats
	switch {
	case m.closed:
		return fmt.Errorf("domain: register: %w", netio.ErrClosed)
	case s.MaxRegistrations > 0 && s.Registrations >= s.MaxRegistrations:
		s.Refused++
		return fmt.Errorf("%w: domain: registration limit %d reached", netio.ErrNoResources, s.MaxRegistrations)
	case s.MaxRegisteredBytes > 0 && s.RegisteredBytes+int64(length) > s.MaxRegisteredBytes:
		s.Refused++
		return fmt.Errorf("%w: domain: registering %d bytes would pass the limit of %d (%d registered)",
			netio.ErrNoResources, length, s.MaxRegisteredBytes, s.RegisteredBytes)
	}
	s.Registrations++
	s.RegisteredBytes += int64(length)
	s.PeakRegistrations = max(s.PeakRegistrations, s.Registrations)
	s.PeakBytes = max(s.PeakBytes, s.RegisteredBytes)
	return nil
}

// unlocked runs the test hook, if a test set one, where a registration is
// being made or undone outside the lock.
func (m *Manager) unlocked() {
	if m.testHook != nil {
		m.testHook()
	}
}

func (m *Manager) unreserve(r *Registration, length int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r != nil {
		delete(m.regs, r)
	}
	m.stats.Registrations--
	m.stats.RegisteredBytes -= int64(length)
}

// Desc returns the descriptor to pass with operations on this memory.
func (r *Registration) Desc() uintptr { return r.mr.Desc() }

// Key returns the key a peer uses for remote access.
func (r *Registration) Key() uint64 { return r.mr.Key() }

// Addr returns the registered address.
func (r *Registration) Addr() uintptr { return r.addr }

// Len returns the registered length in bytes.
func (r *Registration) Len() int { return r.length }

// Access returns the access the registration was made with.
func (r *Registration) Access() Access { return r.access }

// Domain returns the Manager the memory is registered in.
func (r *Registration) Domain() *Manager { return r.m }

// Bytes returns the memory of a registration made by AllocRegistered; it is
// nil for memory the caller registered.
func (r *Registration) Bytes() []byte { return r.mapped }

// Close deregisters the memory (and unmaps it if the Manager allocated it).
// It is idempotent.
func (r *Registration) Close() error {
	mem, err := r.Detach()
	return errors.Join(err, Free(mem))
}

// Detach deregisters the memory and hands its mapping to the caller, who
// unmaps it with Free once nothing can touch it any more. For memory the
// caller registered, the result is nil. Use it when the registration must
// go now but a caller may still hold slices of the memory.
func (r *Registration) Detach() ([]byte, error) {
	m := r.m
	m.mu.Lock()
	_, live := m.regs[r]
	delete(m.regs, r)
	m.mu.Unlock()
	if !live {
		return nil, nil
	}
	// Out of m.regs but still counted in m.stats.Registrations until
	// unreserve: Close refuses until fi_close(mr) has returned.
	m.unlocked()
	err := r.mr.Close()
	m.unreserve(nil, r.length)
	mem := r.mapped
	r.mapped = nil
	return mem, err
}

// AllocRegistered allocates size bytes outside the Go heap (anonymous mmap,
// page-aligned, zeroed, faulted in and advised huge pages as Alloc's are)
// and registers them with the given access. A request past the domain's
// limits fails before any page is touched. Closing the registration
// deregisters first, then unmaps.
func (m *Manager) AllocRegistered(size int, access Access) (*Registration, error) {
	if size <= 0 || size > netio.MaxBufferSize*netio.MaxBufferCount {
		return nil, fmt.Errorf("%w: domain: allocate %d bytes", netio.ErrInvalidArgument, size)
	}
	mem, err := mapAnon(size)
	if err != nil {
		return nil, err
	}
	r, err := m.Register(uintptr(unsafe.Pointer(&mem[0])), size, access)
	if err != nil {
		_ = Free(mem)
		return nil, err
	}
	populate(mem) // as Alloc does, once the limits let it through
	r.mapped = mem[:cap(mem)]
	return r, nil
}

// Free unmaps memory from Alloc (or Detach). A nil slice is a no-op.
func Free(mem []byte) error {
	if mem == nil {
		return nil
	}
	if err := unix.Munmap(mem[:cap(mem)]); err != nil {
		return fmt.Errorf("domain: munmap: %w", err)
	}
	mappedBytes.Add(-int64(cap(mem)))
	return nil
}

// CacheLine is the stride unit of regions cut into buffers: buffers on
// separate cache lines are never written by two borrowers at once.
const CacheLine = 64

// AlignUp rounds n up to a multiple of align (a power of two or not).
func AlignUp(n, align int) int { return (n + align - 1) / align * align }

// Alloc maps size bytes (rounded up to whole pages) of anonymous memory
// outside the Go heap. The result has length size; release it with Free.
//
// The pages are faulted in at once, as an RDMA provider's registration pins
// them: a buffer's first use then pays no page fault. Faulted lazily, the
// first pass over a stream's buffers pays one per page, which shows in the
// throughput of short runs, and a send from a buffer never written reads
// the kernel's shared zero page instead of the buffer's own memory. The
// price is paid when the memory is allocated, and the memory is resident
// from then on. docs/performance.md has the measurements.
//
// A mapping of HugePageAdviceMin bytes or more is advised MADV_HUGEPAGE
// before its pages are faulted in, so that where the kernel's transparent
// huge pages are "always" or "madvise" its aligned 2 MiB stretches are
// huge pages. The resident memory is the same (every page is faulted in
// anyway); what changes is the cost of every kernel copy that pins or
// walks it, such as shm's process_vm_readv, which pins the sender's pages
// one page at a time (docs/performance.md has the figures). Where free huge pages
// are scarce, the kernel's defrag setting
// (/sys/kernel/mm/transparent_hugepage/defrag) decides whether Alloc waits
// for compaction or takes 4 KiB pages.
func Alloc(size int) ([]byte, error) {
	mem, err := mapAnon(size)
	if err == nil {
		populate(mem)
	}
	return mem, err
}

// mapAnon maps size bytes, rounded up to whole pages, without faulting
// them in, advised MADV_HUGEPAGE from HugePageAdviceMin bytes on.
func mapAnon(size int) ([]byte, error) {
	n := AlignUp(size, os.Getpagesize())
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("%w: domain: mmap %d bytes: %v", netio.ErrNoResources, n, err)
	}
	mappedBytes.Add(int64(n))
	if n >= HugePageAdviceMin {
		// Advice: a kernel without transparent huge pages refuses it
		// (EINVAL) and the mapping stays as it was.
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	}
	return mem[:size], nil
}

// HugePageAdviceMin is the length from which Alloc and
// Manager.AllocRegistered advise a mapping MADV_HUGEPAGE: one huge page
// of x86-64 and most arm64 kernels. A shorter mapping cannot hold one.
const HugePageAdviceMin = 2 << 20

// populate faults mem's pages in, writable: MADV_POPULATE_WRITE, or where
// the kernel lacks it (EINVAL before Linux 5.14) a write to every page. On
// any other failure (ENOMEM) the pages stay lazy: a write per page would
// then invite the OOM killer instead of an error.
func populate(mem []byte) {
	mem = mem[:cap(mem)]
	if err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE); err != unix.EINVAL {
		return
	}
	page := os.Getpagesize()
	for i := 0; i < len(mem); i += page {
		mem[i] = 0
	}
}

// mappedBytes is what Alloc mapped and Free has not unmapped yet, in
// whole pages, over the whole process.
var mappedBytes atomic.Int64

// MappedBytes returns how many bytes Alloc has mapped that Free has not
// unmapped yet, in whole pages, over every Manager in the process. Memory
// mapped by other means (a pool's huge-page mappings, for example) is not
// counted. It is a leak check: once every endpoint, pool and buffer is
// closed (and a buffer held past its pool's Close has become unreachable),
// it is back where it started.
func MappedBytes() int64 { return mappedBytes.Load() }
