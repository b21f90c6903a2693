package slots_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
)

// openDomain opens a tcp domain on loopback, closed at cleanup after
// checking that nothing is left registered.
func openDomain(t *testing.T) *domain.Manager {
	t.Helper()
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Equal(t, 0, m.Stats().Registrations, "everything deregistered")
		assert.NoError(t, m.Close())
	})
	return m
}

// newPool makes a single-tier pool in mgr, closed at cleanup (before mgr,
// whose cleanup was registered first).
func newPool(t *testing.T, mgr *domain.Manager, access domain.Access, size, count int) *pool.Pool {
	t.Helper()
	p, err := pool.New(mgr, pool.Config{Access: access, Size: size, Count: count})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

// cut is slots.Cut, closed at cleanup.
func cut(t *testing.T, mgr *domain.Manager, size, count int, access domain.Access) *slots.Memory {
	t.Helper()
	m, err := slots.Cut(mgr, size, count, access)
	require.NoError(t, err)
	require.NotNil(t, m)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m
}

// TestCut: count pieces of size bytes, each on its own cache line, capacity
// capped at size, all in one region registered with access.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		size, count int
		access      domain.Access
	}{
		{1, 3, domain.AccessSend},
		{100, 5, domain.AccessSend},
		{domain.CacheLine, 4, domain.AccessRecv},
		{domain.CacheLine + 1, 7, domain.AccessRecv},
		{4096, 2, domain.AccessSend},
	} {
		mgr := openDomain(t)
		m := cut(t, mgr, tc.size, tc.count, tc.access)
		stride := domain.AlignUp(tc.size, domain.CacheLine)

		assert.Equal(t, tc.count, m.Len())
		assert.Equal(t, tc.size, m.Size())
		region := m.Region()
		require.NotNil(t, region)
		assert.Equal(t, tc.access, region.Access(), "exactly the access asked for")
		assert.GreaterOrEqual(t, region.Len(), stride*tc.count)
		assert.Equal(t, 1, mgr.Stats().Registrations, "one registration for every slot")

		for i := range uint32(tc.count) {
			p := m.Piece(i)
			assert.Len(t, p.Bytes, tc.size, "slot %d", i)
			assert.Equal(t, tc.size, cap(p.Bytes), "slot %d: capacity capped at the slot", i)
			assert.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(p.Bytes))), p.Addr, "slot %d", i)
			assert.Zero(t, p.Addr%domain.CacheLine, "slot %d on a cache line", i)
			assert.Equal(t, region.Addr()+uintptr(int(i)*stride), p.Addr, "slot %d", i)
			assert.Equal(t, region.Desc(), p.Desc, "slot %d", i)
			for j := range p.Bytes {
				p.Bytes[j] = byte(i + 1)
			}
		}
		for i := range uint32(tc.count) {
			for j, b := range m.Piece(i).Bytes {
				if !assert.Equal(t, byte(i+1), b, "slot %d byte %d: written by a neighbour", i, j) {
					break
				}
			}
		}
		grown := append(m.Piece(0).Bytes, 0xff)
		grown[0] = 0xee
		assert.Equal(t, byte(1), m.Piece(0).Bytes[0], "append copies, never reaching the next slot")
		if tc.count > 1 {
			assert.Equal(t, byte(2), m.Piece(1).Bytes[0])
		}

		require.NoError(t, m.Close())
		assert.Equal(t, 0, mgr.Stats().Registrations, "Close deregisters")
		assert.NoError(t, m.Close(), "idempotent")
		assert.Equal(t, 0, mgr.Stats().Registrations)
	}
}

// TestCutRefuses: a region of no bytes is refused and registers nothing.
func TestCutRefuses(t *testing.T) {
	mgr := openDomain(t)
	for _, tc := range []struct{ size, count int }{{0, 4}, {64, 0}, {-1, 4}} {
		m, err := slots.Cut(mgr, tc.size, tc.count, domain.AccessSend)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "size %d count %d", tc.size, tc.count)
		assert.Nil(t, m)
	}
	assert.Equal(t, 0, mgr.Stats().Registrations)
}

// TestCutCloseHeld: with a slot held, the region is deregistered at once
// but stays mapped until later runs; with none held, both happen at once.
func TestCutCloseHeld(t *testing.T) {
	mgr := openDomain(t)
	base := domain.MappedBytes()

	m := cut(t, mgr, 100, 4, domain.AccessSend)
	mapped := domain.MappedBytes() - base
	require.Positive(t, mapped)
	require.Equal(t, 1, mgr.Stats().Registrations)
	held := m.Piece(2).Bytes

	var asked []uint32
	later, err := m.CloseHeld(func(i uint32) bool { asked = append(asked, i); return i == 2 })
	require.NoError(t, err)
	require.NotNil(t, later, "a held slot keeps the memory for later")
	assert.Equal(t, 0, mgr.Stats().Registrations, "deregistered at once")
	assert.Equal(t, mapped, domain.MappedBytes()-base, "still mapped for the holder")
	assert.Contains(t, asked, uint32(2))
	held[0], held[len(held)-1] = 1, 2 // the holder may still write it

	again, err := m.CloseHeld(func(uint32) bool { return true })
	assert.NoError(t, err)
	assert.Nil(t, again, "idempotent")
	assert.NoError(t, m.Close())

	later()
	assert.Equal(t, int64(0), domain.MappedBytes()-base, "later unmaps")

	m2 := cut(t, mgr, 100, 4, domain.AccessSend)
	later, err = m2.CloseHeld(func(uint32) bool { return false })
	assert.NoError(t, err)
	assert.Nil(t, later, "nothing held: nothing left for later")
	assert.Equal(t, 0, mgr.Stats().Registrations)
	assert.Equal(t, int64(0), domain.MappedBytes()-base, "unmapped at once")
}

// TestLease: count buffers from a pool registered with exactly the access
// asked for, each capped at size; Close hands them back.
func TestLease(t *testing.T) {
	for _, access := range []domain.Access{domain.AccessRecv, domain.AccessSend} {
		t.Run(access.String(), func(t *testing.T) {
			mgr := openDomain(t)
			p := newPool(t, mgr, access, 256, 2)
			const size, count = 200, 5 // more than the pool has: it grows

			m, err := slots.Lease(mgr, p, size, count, access)
			require.NoError(t, err)
			require.NotNil(t, m)
			t.Cleanup(func() { assert.NoError(t, m.Close()) })

			assert.Equal(t, count, p.Stats().InUse())
			assert.Equal(t, count, m.Len())
			assert.Equal(t, size, m.Size())
			assert.Nil(t, m.Region(), "leased memory has no region of its own")
			regs := mgr.Registrations()
			for _, r := range regs {
				assert.Equal(t, access, r.Access, "registration at %#x", r.Addr)
			}
			addrs := map[uintptr]bool{}
			for i := range uint32(count) {
				pc := m.Piece(i)
				assert.Len(t, pc.Bytes, size, "slot %d", i)
				assert.Equal(t, size, cap(pc.Bytes), "slot %d: capacity capped at the slot", i)
				assert.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(pc.Bytes))), pc.Addr, "slot %d", i)
				assert.False(t, addrs[pc.Addr], "slot %d shares a buffer", i)
				addrs[pc.Addr] = true
				inside := false
				for _, r := range regs {
					inside = inside || (pc.Addr >= r.Addr && pc.Addr+size <= r.Addr+uintptr(r.Len))
				}
				assert.True(t, inside, "slot %d lies in a registration", i)
			}

			require.NoError(t, m.Close())
			assert.Equal(t, 0, p.Stats().InUse(), "every lease handed back")
			assert.NoError(t, m.Close(), "idempotent")
			assert.Equal(t, 0, p.Stats().InUse())
		})
	}
}

// TestLeaseRefuses: a pool registered with other access than asked for
// (less, or more), of another domain, or nil is refused before anything is
// leased.
func TestLeaseRefuses(t *testing.T) {
	mgr := openDomain(t)
	other := openDomain(t)
	recv := newPool(t, mgr, domain.AccessRecv, 256, 2)
	both := newPool(t, mgr, domain.AccessRecv|domain.AccessSend, 256, 2)
	foreign := newPool(t, other, domain.AccessRecv, 256, 2)

	for name, tc := range map[string]struct {
		src  *pool.Pool
		need domain.Access
	}{
		"send from a receive pool":     {recv, domain.AccessSend},
		"receive from a send+recv one": {both, domain.AccessRecv},
		"send from a send+recv one":    {both, domain.AccessSend},
		"another domain's pool":        {foreign, domain.AccessRecv},
		"nil pool":                     {nil, domain.AccessRecv},
	} {
		m, err := slots.Lease(mgr, tc.src, 64, 2, tc.need)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, m, name)
		assert.ErrorIs(t, slots.CheckPool(tc.src, mgr, tc.need), netio.ErrInvalidArgument, name)
	}
	for _, p := range []*pool.Pool{recv, both, foreign} {
		assert.Equal(t, 0, p.Stats().InUse(), "nothing leased")
	}

	assert.NoError(t, slots.CheckPool(recv, mgr, domain.AccessRecv))
	assert.NoError(t, slots.CheckPool(foreign, other, domain.AccessRecv))
	assert.NoError(t, slots.CheckPool(foreign, nil, domain.AccessRecv), "no domain to match")
	assert.ErrorIs(t, slots.CheckPool(recv, nil, domain.AccessSend), netio.ErrInvalidArgument,
		"access is checked without a domain too")
	assert.ErrorIs(t, slots.CheckPool(nil, nil, domain.AccessSend), netio.ErrInvalidArgument)
}

// TestLeaseAllOrNone: a pool that cannot supply every buffer leases none
// and says it has no resources.
func TestLeaseAllOrNone(t *testing.T) {
	mgr := openDomain(t)
	p, err := pool.New(mgr, pool.Config{Access: domain.AccessRecv, Size: 256, Count: 2, Budget: 3 * 256})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })

	m, err := slots.Lease(mgr, p, 256, 4, domain.AccessRecv)
	assert.ErrorIs(t, err, netio.ErrNoResources)
	assert.Nil(t, m)
	assert.Equal(t, 0, p.Stats().InUse(), "the ones leased before the failure went back")

	m, err = slots.Lease(mgr, p, 256, 3, domain.AccessRecv)
	require.NoError(t, err, "within the budget")
	assert.Equal(t, 3, p.Stats().InUse())
	require.NoError(t, m.Close())
	assert.Equal(t, 0, p.Stats().InUse())
}

// TestLeaseCloseHeld: the free slots' leases go back at once, a held one
// when later runs or when its holder gives it back through Release, once.
func TestLeaseCloseHeld(t *testing.T) {
	mgr := openDomain(t)
	p := newPool(t, mgr, domain.AccessSend, 128, 4)

	m, err := slots.Lease(mgr, p, 128, 4, domain.AccessSend)
	require.NoError(t, err)
	later, err := m.CloseHeld(func(i uint32) bool { return i == 1 || i == 3 })
	require.NoError(t, err)
	require.NotNil(t, later)
	assert.Equal(t, 2, p.Stats().InUse(), "the held leases stay")

	m.Release(1) // its holder gave it back late
	assert.Equal(t, 1, p.Stats().InUse())
	m.Release(1)
	assert.Equal(t, 1, p.Stats().InUse(), "a second Release is a no-op")

	later()
	assert.Equal(t, 0, p.Stats().InUse(), "later hands back what is left")
	later()
	assert.Equal(t, 0, p.Stats().InUse(), "and nothing twice")

	again, err := m.CloseHeld(nil)
	assert.NoError(t, err)
	assert.Nil(t, again, "idempotent")

	m2, err := slots.Lease(mgr, p, 128, 2, domain.AccessSend)
	require.NoError(t, err)
	later, err = m2.CloseHeld(func(uint32) bool { return false })
	assert.NoError(t, err)
	assert.Nil(t, later, "nothing held: nothing for later")
	assert.Equal(t, 0, p.Stats().InUse())
}
