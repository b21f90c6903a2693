package pool

import (
	"math/bits"
	"sync/atomic"

	"github.com/netio-go/netio/domain"
)

// slot is one registered buffer. It is owned by its tier's free list while
// free, by its handles while leased.
type slot struct {
	t    *tier
	mem  []byte // len = tier size
	addr uintptr
	reg  *domain.Registration
	m    *mapping
	// state packs the lease generation (upper 32 bits, incremented by
	// every lease) and the mask of live handles of that lease (lower 32
	// bits, one bit per handle). The mask is 0 exactly while the slot is
	// free (or destroyed). Handles change it only by CAS after checking
	// their generation and bit, so a stale handle can never touch a later
	// lease.
	state atomic.Uint64
	// next is where Ref starts looking for a free handle bit: bits are
	// handed out round robin, so a released handle's bit is reused as late
	// as possible. Only a hint; state decides.
	next atomic.Uint32
	// extra marks a buffer added above the configured count: only those
	// are shrunk after IdleTimeout.
	extra bool
	// freedAt is the shrink epoch of the last return to the free list.
	// Guarded by t.mu.
	freedAt int64
}

// Layout of slot.state.
const (
	genShift = 32
	maskBits = 1<<genShift - 1
	maxRefs  = genShift // live handles per lease
)

// lease hands the slot, which nobody holds (mask 0), to a caller: a new
// generation with one handle (bit 0).
func (s *slot) lease() Buffer {
	st := s.state.Add(1<<genShift | 1)
	return Buffer{s: s, gen: uint32(st >> genShift), bit: 1}
}

// Buffer is a handle to a leased, registered buffer. It is a small value:
// copy it freely, but a copy is the same handle, not a new reference (use
// Ref for that). The zero Buffer is no buffer (Valid reports false); Get,
// TryGet and GetOrExtend return it when they fail.
//
// A handle names one lease of one buffer (by a generation the buffer
// bumps on every lease) and one reference within it. Handles of a lease
// share the buffer by reference count (Ref); it goes back to the pool when
// the last one is released. Release and Ref check the handle against the
// buffer's current lease atomically, so a handle released twice, or one
// kept past its lease (a stale copy, a deferred Release after an explicit
// one), never releases or refers to the buffer's next lease: that is a
// no-op.
//
// The accessors (Bytes, Size, Addr, Desc, Key, Registration) do not check
// the lease: using the memory after Release is a misuse, as with any pool,
// since it may belong to another lease by then. They must not be called on
// the zero Buffer.
type Buffer struct {
	s   *slot
	gen uint32 // lease generation
	bit uint32 // this handle's bit in the lease's mask
}

// Valid reports whether b is a handle, not the zero Buffer. It stays true
// after Release; UseCount tells whether the lease is still held.
func (b Buffer) Valid() bool { return b.s != nil }

// Bytes returns the buffer's memory; its length is the tier size, which is
// at least the size asked for.
func (b Buffer) Bytes() []byte { return b.s.mem }

// Size returns the buffer's size in bytes (its tier's size).
func (b Buffer) Size() int { return len(b.s.mem) }

// Addr returns the address of the buffer's first byte.
func (b Buffer) Addr() uintptr { return b.s.addr }

// Desc returns the registration descriptor to pass with operations on the
// buffer.
func (b Buffer) Desc() uintptr { return b.s.reg.Desc() }

// Key returns the registration key a peer uses for remote access.
func (b Buffer) Key() uint64 { return b.s.reg.Key() }

// Registration returns the buffer's own registration. Do not close it: the
// pool does, when the buffer is shrunk or the pool closed.
func (b Buffer) Registration() *domain.Registration { return b.s.reg }

// UseCount returns the number of live handles of b's lease: 0 when that
// lease has ended (the buffer is free or leased again) and for the zero
// Buffer.
func (b Buffer) UseCount() int {
	if b.s == nil {
		return 0
	}
	st := b.s.state.Load()
	if uint32(st>>genShift) != b.gen {
		return 0
	}
	return bits.OnesCount32(uint32(st & maskBits))
}

// Ref returns another handle to the same buffer and counts it; release each
// handle once. A lease has at most 32 live handles: Ref returns the zero
// Buffer when all 32 are live, when b was released (or its lease ended),
// and for the zero Buffer. It does not allocate.
//
// Handle bits are handed out round robin, and a released handle's bit is
// reused by a later Ref of the same lease only when Ref has cycled through
// the other free bits; releasing a handle again after that would release
// the newer one. So release each handle once; the guarantee against stale
// handles of earlier leases does not depend on this.
func (b Buffer) Ref() Buffer {
	s := b.s
	if s == nil {
		return Buffer{}
	}
	for {
		st := s.state.Load()
		mask := uint32(st & maskBits)
		if uint32(st>>genShift) != b.gen || mask&b.bit == 0 || mask == maskBits {
			return Buffer{}
		}
		free := ^mask
		c := s.next.Load() % maxRefs
		f := free &^ (1<<c - 1) // free bits at or above the cursor
		if f == 0 {
			f = free
		}
		nb := f & -f
		if s.state.CompareAndSwap(st, st|uint64(nb)) {
			s.next.Store(uint32(bits.TrailingZeros32(nb)) + 1)
			return Buffer{s: s, gen: b.gen, bit: nb}
		}
	}
}

// Release gives up this handle. When it was the last live handle of its
// lease, the buffer goes back to its tier (to the oldest waiter it fits, if
// any); after Close it is deregistered and unmapped.
//
// Releasing a handle again is a no-op, and so is releasing a stale handle
// whose lease has ended, even when the buffer has been leased again since:
// it never releases another lease, never frees a buffer twice. Releasing
// the zero Buffer is a no-op. (Generations are 32 bits: a stale handle
// would only match again after 2^32 more leases of its buffer.)
func (b Buffer) Release() {
	s := b.s
	if s == nil {
		return
	}
	for {
		st := s.state.Load()
		if uint32(st>>genShift) != b.gen || uint32(st)&b.bit == 0 {
			return
		}
		nst := st &^ uint64(b.bit)
		if s.state.CompareAndSwap(st, nst) {
			if nst&maskBits == 0 {
				s.t.put(s)
			}
			return
		}
	}
}
