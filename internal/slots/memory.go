package slots

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/pool"
)

// Piece is one slot's memory: its bytes (capacity capped at the slot
// size, so a slice of it cannot reach the next slot), address and
// registration descriptor.
type Piece struct {
	Bytes []byte
	Addr  uintptr
	Desc  uintptr
}

// Memory is the registered memory of n equal slots: cut from one region
// registered for the set (one registration), or leased from a pool.Pool
// (one registration per lease). Close gives it back.
type Memory struct {
	pieces []Piece
	region *domain.Registration // the set's own region, or nil
	leases []pool.Buffer        // the lease behind each slot, or nil
	size   int
	stride int
	closed bool
}

// Cut registers one region of count slots of size bytes in mgr with
// access, each slot starting on a cache line.
func Cut(mgr *domain.Manager, size, count int, access domain.Access) (*Memory, error) {
	stride := domain.AlignUp(size, domain.CacheLine)
	region, err := mgr.AllocRegistered(stride*count, access)
	if err != nil {
		return nil, err
	}
	mem := region.Bytes()
	m := &Memory{region: region, size: size, stride: stride}
	m.describe(count, func(i int) ([]byte, uintptr) { return mem[i*stride : i*stride+size], region.Desc() })
	return m, nil
}

// Lease leases count buffers of at least size bytes from src, all or none
// (pool.Pool.GetOrExtendN), after checking that src belongs to mgr and is
// registered with exactly access: a pool that also allowed more (receiving
// into send buffers, remote writes) would break least access. Errors wrap
// netio.ErrInvalidArgument for such a pool, netio.ErrNoResources when it
// cannot supply them all.
func Lease(mgr *domain.Manager, src *pool.Pool, size, count int, access domain.Access) (*Memory, error) {
	if err := CheckPool(src, mgr, access); err != nil {
		return nil, err
	}
	leases, err := src.GetOrExtendN(make([]pool.Buffer, 0, count), size, count)
	if err != nil {
		return nil, fmt.Errorf("buffers from the pool: %w", err)
	}
	m := &Memory{leases: leases, size: size}
	m.describe(count, func(i int) ([]byte, uintptr) { return leases[i].Bytes()[:size], leases[i].Desc() })
	return m, nil
}

// CheckPool refuses a pool.Pool that slots of mgr cannot draw from: nil,
// of another domain (its descriptors mean nothing to mgr's endpoints), or
// registered with other access than need. Errors wrap
// netio.ErrInvalidArgument.
func CheckPool(src *pool.Pool, mgr *domain.Manager, need domain.Access) error {
	switch {
	case src == nil:
		return fmt.Errorf("%w: nil buffer pool", netio.ErrInvalidArgument)
	case mgr != nil && src.Domain() != mgr:
		return fmt.Errorf("%w: the buffer pool belongs to another domain", netio.ErrInvalidArgument)
	case src.Access() != need:
		return fmt.Errorf("%w: the buffer pool is registered for %s, these buffers need %s and nothing more",
			netio.ErrInvalidArgument, src.Access(), need)
	}
	return nil
}

// describe fills in the pieces; at returns slot i's memory and descriptor.
func (m *Memory) describe(count int, at func(i int) ([]byte, uintptr)) {
	m.pieces = make([]Piece, count)
	for i := range m.pieces {
		p := &m.pieces[i]
		p.Bytes, p.Desc = at(i)
		p.Bytes = p.Bytes[:len(p.Bytes):len(p.Bytes)]
		p.Addr = uintptr(unsafe.Pointer(unsafe.SliceData(p.Bytes)))
	}
}

// Piece returns slot i's memory.
func (m *Memory) Piece(i uint32) *Piece { return &m.pieces[i] }

// Len returns the number of slots.
func (m *Memory) Len() int { return len(m.pieces) }

// Size returns the size of a slot.
func (m *Memory) Size() int { return m.size }

// Region returns the set's own region, or nil for leased memory.
func (m *Memory) Region() *domain.Registration { return m.region }

// Close deregisters and unmaps the region, or hands every lease back. Call
// it only once nothing is posted: the provider may use the memory until
// then. It is idempotent.
func (m *Memory) Close() error {
	_, err := m.CloseHeld(nil)
	return err
}

// CloseHeld is Close for memory whose slots a caller may still hold and
// write (held reports which): their memory stays valid until they are
// given back. The region is deregistered at once and unmapped at once when
// nothing is held; the free slots' leases go back at once. What stays is
// returned as later, for the owner to run once it and every slot are
// unreachable (runtime.AddCleanup); a held lease given back earlier goes
// through Release. It is idempotent.
func (m *Memory) CloseHeld(held func(i uint32) bool) (later func(), err error) {
	if m.closed {
		return nil, nil
	}
	m.closed = true
	isHeld := func(i int) bool { return held != nil && held(uint32(i)) }
	if m.leases != nil {
		var kept []pool.Buffer
		for i, b := range m.leases {
			if isHeld(i) {
				kept = append(kept, b)
			} else {
				b.Release()
			}
		}
		if len(kept) > 0 {
			later = func() { releaseAll(kept) }
		}
		return later, nil
	}
	mem, err := m.region.Detach()
	for i := range m.pieces {
		if isHeld(i) {
			return func() { _ = domain.Free(mem) }, err
		}
	}
	return nil, errors.Join(err, domain.Free(mem))
}

// Release hands back the lease of slot i after Close, for a slot its
// holder gave back late. A second Release of a lease is a no-op.
func (m *Memory) Release(i uint32) {
	if m.leases != nil {
		m.leases[i].Release()
	}
}

func releaseAll(leases []pool.Buffer) {
	for _, b := range leases {
		b.Release()
	}
}

// PostReceives posts every slot as a receive buffer on ep, in batches
// (fabric.Endpoint.RecvBatch), slot i with the context ctx(i). The caller
// reposts a slot when its receive completes.
func (m *Memory) PostReceives(ep *fabric.Endpoint, ctx func(i uint32) uint64) error {
	n := len(m.pieces)
	addrs, lens := make([]uintptr, n), make([]uint64, n)
	descs, ctxs := make([]uintptr, n), make([]uint64, n)
	for i := range m.pieces {
		p := &m.pieces[i]
		addrs[i], lens[i], descs[i], ctxs[i] = p.Addr, uint64(len(p.Bytes)), p.Desc, ctx(uint32(i))
	}
	for done := 0; done < n; {
		posted, errno := ep.RecvBatch(addrs[done:], lens[done:], descs[done:], ctxs[done:])
		if errno != 0 {
			return fmt.Errorf("posting %d receive buffers (%d posted): %w", n, done, errno)
		}
		done += posted
	}
	return nil
}
