package pool

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// Allocator provides the memory behind a pool's buffers. The memory must lie
// outside the Go heap (the NIC may touch it at any time) and stay mapped
// until Free. Implementations must be safe for concurrent use.
type Allocator interface {
	// Alloc returns size bytes of zeroed, writable memory outside the Go
	// heap; len(mem) == size. Errors should wrap netio.ErrNoResources when
	// the memory is not there.
	Alloc(size int) (mem []byte, err error)
	// Free releases memory returned by Alloc, passed back exactly as Alloc
	// returned it.
	Free(mem []byte) error
}

// MmapAllocator allocates page-aligned anonymous mappings with domain.Alloc
// (advised MADV_HUGEPAGE from domain.HugePageAdviceMin bytes on, so that
// transparent huge pages may back them). It is the default.
type MmapAllocator struct{}

// Alloc maps size bytes (rounded up to whole pages).
func (MmapAllocator) Alloc(size int) ([]byte, error) { return domain.Alloc(size) }

// Free unmaps memory from Alloc.
func (MmapAllocator) Free(mem []byte) error { return domain.Free(mem) }

// HugePageAllocator backs buffers with huge pages: an explicit hugetlb
// mapping (MAP_HUGETLB, rounded up to whole huge pages) where the system has
// huge pages reserved, otherwise an ordinary mapping marked
// MADV_HUGEPAGE so that transparent huge pages may back it. The first
// fallback is logged once. Huge pages cut TLB misses and, on RDMA NICs, the
// number of pages the NIC must translate; they are worth it for buffers of
// a huge page or more (configured tiers share one mapping, so many small
// buffers qualify too).
//
// The zero value is ready to use; share one between pools freely.
type HugePageAllocator struct {
	// Logger receives the fallback note. nil selects the Config.Logger of
	// the first pool the allocator is given to.
	Logger *zerolog.Logger

	log      atomic.Pointer[zerolog.Logger]
	noteOnce sync.Once
	hugeTLB  atomic.Int64
	fallback atomic.Int64
}

// bind gives the allocator the pool's logger unless it has its own.
func (a *HugePageAllocator) bind(log zerolog.Logger) {
	if a.Logger != nil {
		a.log.Store(a.Logger)
		return
	}
	a.log.CompareAndSwap(nil, &log)
}

// Mappings returns how many mappings Alloc made with MAP_HUGETLB and how many
// fell back to an ordinary mapping with MADV_HUGEPAGE.
func (a *HugePageAllocator) Mappings() (hugeTLB, fallback int64) {
	return a.hugeTLB.Load(), a.fallback.Load()
}

// Alloc maps size bytes, with huge pages where the system provides them.
func (a *HugePageAllocator) Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: pool: allocate %d bytes", netio.ErrInvalidArgument, size)
	}
	hp := hugePageSize()
	n := domain.AlignUp(size, hp)
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB)
	if err == nil {
		a.hugeTLB.Add(1)
		return mem[:size], nil
	}
	// No hugetlb pages reserved (ENOMEM) or no hugetlbfs support (EINVAL):
	// an ordinary mapping, hinting that transparent huge pages may back it.
	// It is mapped here, not with domain.Alloc, so that Free unmaps both
	// kinds alike and domain.MappedBytes counts neither.
	mem, ferr := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if ferr != nil {
		return nil, fmt.Errorf("%w: pool: mmap %d bytes: %v", netio.ErrNoResources, n, ferr)
	}
	mem = mem[:size]
	merr := unix.Madvise(mem[:cap(mem)], unix.MADV_HUGEPAGE)
	a.fallback.Add(1)
	a.noteOnce.Do(func() {
		if l := a.log.Load(); l != nil {
			l.Info().AnErr("map_hugetlb", err).AnErr("madvise", merr).Int("huge_page_size", hp).
				Msg("pool: huge pages not available with MAP_HUGETLB; using mmap with MADV_HUGEPAGE")
		}
	})
	return mem, nil
}

// Free unmaps memory from Alloc.
func (a *HugePageAllocator) Free(mem []byte) error {
	if mem == nil {
		return nil
	}
	if err := unix.Munmap(mem[:cap(mem)]); err != nil {
		return fmt.Errorf("pool: munmap: %w", err)
	}
	return nil
}

var hugePage = sync.OnceValue(func() int {
	const fallback = 2 << 20
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return fallback
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "Hugepagesize:" {
			if kb, err := strconv.Atoi(string(f[1])); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return fallback
})

// hugePageSize returns the system's default huge page size (2 MiB when it
// cannot be read).
func hugePageSize() int { return hugePage() }
