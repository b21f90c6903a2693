package headerbuf_test

import (
	"bytes"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/headerbuf"
)

// openDomain opens a tcp domain on loopback, closed at cleanup after
// checking that nothing is left registered.
func openDomain(t testing.TB) *domain.Manager {
	t.Helper()
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Equal(t, 0, m.Stats().Registrations, "everything deregistered")
		assert.NoError(t, m.Close())
	})
	return m
}

// newHeaderBuffer makes a HeaderBuffer closed at cleanup (before its domain).
func newHeaderBuffer(t testing.TB, slotSize, slotCount int) (*headerbuf.HeaderBuffer, *domain.Manager) {
	t.Helper()
	m := openDomain(t)
	h, err := headerbuf.New(m, slotSize, slotCount)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Close()) })
	return h, m
}

func returnAll(t *testing.T, h *headerbuf.HeaderBuffer, idx ...uint32) {
	t.Helper()
	for _, i := range idx {
		_, st := h.ReturnHeader(i)
		assert.Equal(t, netio.OK, st, "slot %d", i)
	}
}

func TestNewLayout(t *testing.T) {
	h, m := newHeaderBuffer(t, 100, 4)
	st := m.Stats()
	assert.Equal(t, 1, st.Registrations, "one registration for all slots")
	assert.Equal(t, int64(4*128), st.RegisteredBytes)
	assert.Equal(t, 100, h.SlotSize())
	assert.Equal(t, 4, h.SlotCount())
	assert.Equal(t, 4*128, h.RegionSize(), "stride rounded up to 64")
	assert.Same(t, m, h.Domain())
	assert.NotZero(t, h.Region())
	assert.Zero(t, h.Region()%64)
	assert.NotZero(t, h.Desc(), "tcp hands out a descriptor")

	seen := map[uintptr]bool{}
	var idx []uint32
	for i := range 4 {
		r := h.GetHeader(make([]byte, 100), uint64(i))
		require.Equal(t, netio.OK, r.Status)
		assert.Equal(t, uint32(i), r.Index, "low indices first")
		assert.Zero(t, r.Addr%64, "cache-line aligned")
		assert.Equal(t, h.Region()+uintptr(i*128), r.Addr)
		assert.False(t, seen[r.Addr], "distinct slots")
		seen[r.Addr] = true
		r.Header[99] = 0xff // writable to the last byte
		idx = append(idx, r.Index)
	}
	returnAll(t, h, idx...)
}

func TestGetHeaderCopies(t *testing.T) {
	h, _ := newHeaderBuffer(t, 64, 2)
	data := []byte("a small header: tag 7, seq 42")
	r := h.GetHeader(data, 9)
	require.Equal(t, netio.OK, r.Status)
	assert.Equal(t, data, r.Header, "content")
	assert.Len(t, r.Header, len(data), "length")
	assert.Equal(t, uintptr(unsafe.Pointer(&r.Header[0])), r.Addr, "Addr points at Header")
	assert.GreaterOrEqual(t, r.Addr, h.Region())
	assert.Less(t, r.Addr, h.Region()+uintptr(h.RegionSize()), "inside the registered region")

	data[0] = 'X'
	assert.Equal(t, byte('a'), r.Header[0], "a copy, not the caller's memory")

	full := bytes.Repeat([]byte{0xab}, 64)
	r2 := h.GetHeader(full, 10)
	require.Equal(t, netio.OK, r2.Status)
	assert.Equal(t, full, r2.Header, "exactly a slot")
	assert.Equal(t, data[1:], r.Header[1:], "the other slot untouched")

	returnAll(t, h, r.Index, r2.Index)
}

func TestZeroLengthHeader(t *testing.T) {
	h, _ := newHeaderBuffer(t, 32, 1)
	r := h.GetHeader(nil, 77)
	require.Equal(t, netio.OK, r.Status)
	assert.Empty(t, r.Header)
	assert.Equal(t, h.Region(), r.Addr, "the slot's start")
	assert.Equal(t, netio.NoResources, h.GetHeader(nil, 78).Status, "a slot was taken")
	assert.Equal(t, []uint64{77}, h.PendingSends())
	key, st := h.ReturnHeader(r.Index)
	assert.Equal(t, netio.OK, st)
	assert.Equal(t, uint64(77), key, "the key comes back")
}

func TestExhaustionAndRecovery(t *testing.T) {
	h, _ := newHeaderBuffer(t, 16, 3)
	var got []headerbuf.Result
	for i := range 3 {
		r := h.GetHeader([]byte{byte(i)}, uint64(100+i))
		require.Equal(t, netio.OK, r.Status)
		got = append(got, r)
	}
	r := h.GetHeader([]byte{1}, 200)
	assert.Equal(t, netio.NoResources, r.Status)
	assert.Nil(t, r.Header)
	assert.Zero(t, r.Addr)
	assert.ElementsMatch(t, []uint64{100, 101, 102}, h.PendingSends(), "the refused key is not remembered")

	key, st := h.ReturnHeader(got[1].Index)
	require.Equal(t, netio.OK, st)
	assert.Equal(t, uint64(101), key)
	r = h.GetHeader([]byte{9, 9}, 201)
	require.Equal(t, netio.OK, r.Status, "recovered after ReturnHeader")
	assert.Equal(t, got[1].Index, r.Index, "the freed slot")
	assert.Equal(t, []byte{9, 9}, r.Header)
	assert.Equal(t, netio.NoResources, h.GetHeader(nil, 202).Status)

	returnAll(t, h, got[0].Index, got[2].Index, r.Index)
}

func TestOversize(t *testing.T) {
	h, _ := newHeaderBuffer(t, 60, 2) // stride 64: still only 60 bytes fit
	r := h.GetHeader(make([]byte, 61), 5)
	assert.Equal(t, netio.InvalidArgument, r.Status)
	assert.Nil(t, r.Header)
	assert.Empty(t, h.PendingSends(), "nothing taken")
	assert.Equal(t, 2, h.NumAvailable(), "nothing taken")

	r = h.GetHeader(make([]byte, 60), 6)
	require.Equal(t, netio.OK, r.Status)
	returnAll(t, h, r.Index)
}

func TestKeysComeBackExactly(t *testing.T) {
	keys := []uint64{0, math.MaxUint64, 1, 1 << 63, 0xdeadbeefcafe}
	h, _ := newHeaderBuffer(t, 8, len(keys))
	idx := make([]uint32, len(keys))
	for i, k := range keys {
		r := h.GetHeader([]byte{byte(i)}, k)
		require.Equal(t, netio.OK, r.Status)
		idx[i] = r.Index
	}
	assert.ElementsMatch(t, keys, h.PendingSends())
	// Return in another order than taken.
	for _, i := range []int{3, 0, 4, 1, 2} {
		key, st := h.ReturnHeader(idx[i])
		assert.Equal(t, netio.OK, st)
		assert.Equal(t, keys[i], key, "key of slot %d", idx[i])
	}
	assert.Empty(t, h.PendingSends())
}

func TestReturnHeaderInvalid(t *testing.T) {
	h, _ := newHeaderBuffer(t, 8, 2)
	r := h.GetHeader([]byte{1, 2, 3}, 42)
	require.Equal(t, netio.OK, r.Status)
	h.NumAvailable() // start an interval at 1 free

	check := func(idx uint32, why string) {
		t.Helper()
		key, st := h.ReturnHeader(idx)
		assert.Equal(t, netio.InvalidArgument, st, why)
		assert.Zero(t, key, why)
		assert.Equal(t, []uint64{42}, h.PendingSends(), "%s: nothing changed", why)
		assert.Equal(t, []byte{1, 2, 3}, r.Header, "%s: slot untouched", why)
	}
	check(2, "one past the last slot")
	check(math.MaxUint32, "far out of range")
	check(1-r.Index, "a free slot")
	assert.Equal(t, 1, h.NumAvailable(), "free count unchanged")

	key, st := h.ReturnHeader(r.Index)
	require.Equal(t, netio.OK, st)
	assert.Equal(t, uint64(42), key)
	key, st = h.ReturnHeader(r.Index)
	assert.Equal(t, netio.InvalidArgument, st, "returned twice")
	assert.Zero(t, key)
	assert.Equal(t, 1, h.NumAvailable(), "the interval's minimum")
	assert.Equal(t, 2, h.NumAvailable(), "the double return added no slot")

	// Still usable: both slots can be taken once each.
	a, b := h.GetHeader(nil, 1), h.GetHeader(nil, 2)
	require.Equal(t, netio.OK, a.Status)
	require.Equal(t, netio.OK, b.Status)
	assert.NotEqual(t, a.Index, b.Index)
	assert.Equal(t, netio.NoResources, h.GetHeader(nil, 3).Status)
	returnAll(t, h, a.Index, b.Index)
}

func TestNumAvailableMinimum(t *testing.T) {
	h, _ := newHeaderBuffer(t, 8, 4)
	assert.Equal(t, 4, h.NumAvailable(), "all free at the start")

	a := h.GetHeader(nil, 1)
	b := h.GetHeader(nil, 2)
	c := h.GetHeader(nil, 3)
	returnAll(t, h, b.Index, c.Index)
	assert.Equal(t, 1, h.NumAvailable(), "the minimum of the interval, not the current 3")
	assert.Equal(t, 3, h.NumAvailable(), "a new interval starts at the current count")

	d := h.GetHeader(nil, 4)
	assert.Equal(t, 2, h.NumAvailable())
	assert.Equal(t, 2, h.NumAvailable(), "no change in the interval")

	var all []uint32
	for {
		r := h.GetHeader(nil, 5)
		if r.Status != netio.OK {
			assert.Equal(t, netio.NoResources, r.Status)
			break
		}
		all = append(all, r.Index)
	}
	returnAll(t, h, all...)
	assert.Equal(t, 0, h.NumAvailable(), "ran dry in the interval")
	assert.Equal(t, 2, h.NumAvailable())

	returnAll(t, h, a.Index, d.Index)
	assert.Equal(t, 2, h.NumAvailable(), "returns do not lower the minimum")
	assert.Equal(t, 4, h.NumAvailable())
}

func TestPendingSends(t *testing.T) {
	h, _ := newHeaderBuffer(t, 8, 4)
	assert.Empty(t, h.PendingSends())
	a := h.GetHeader(nil, 10)
	b := h.GetHeader(nil, 20)
	c := h.GetHeader(nil, 30)
	assert.ElementsMatch(t, []uint64{10, 20, 30}, h.PendingSends())
	returnAll(t, h, b.Index)
	assert.ElementsMatch(t, []uint64{10, 30}, h.PendingSends())
	d := h.GetHeader(nil, 40)
	assert.ElementsMatch(t, []uint64{10, 30, 40}, h.PendingSends())
	returnAll(t, h, a.Index, c.Index, d.Index)
	assert.Empty(t, h.PendingSends())
}

func TestCloseWithSlotsInUse(t *testing.T) {
	m := openDomain(t)
	h, err := headerbuf.New(m, 32, 2)
	require.NoError(t, err)
	r := h.GetHeader([]byte("hdr"), 7)
	require.Equal(t, netio.OK, r.Status)

	err = h.Close()
	assert.ErrorIs(t, err, netio.ErrNoResources)
	assert.Equal(t, 1, m.Stats().Registrations, "still registered")
	assert.Equal(t, []uint64{7}, h.PendingSends(), "nothing changed")
	assert.Equal(t, []byte("hdr"), r.Header, "still mapped")
	r2 := h.GetHeader([]byte("x"), 8)
	assert.Equal(t, netio.OK, r2.Status, "still open")

	returnAll(t, h, r.Index, r2.Index)
	assert.NoError(t, h.Close())
	assert.Equal(t, 0, m.Stats().Registrations, "deregistered")
	assert.NoError(t, h.Close(), "idempotent")
	assert.Equal(t, netio.Closed, h.GetHeader(nil, 9).Status, "nothing after Close")
	_, st := h.ReturnHeader(0)
	assert.Equal(t, netio.InvalidArgument, st)
}

func TestNewBadArguments(t *testing.T) {
	m := openDomain(t)
	for _, tc := range []struct {
		name        string
		size, count int
	}{
		{"zero size", 0, 4},
		{"negative size", -1, 4},
		{"zero count", 64, 0},
		{"negative count", 64, -3},
		{"slot too large", netio.MaxBufferSize + 1, 1},
		{"too many slots", 64, netio.MaxBufferCount + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := headerbuf.New(m, tc.size, tc.count)
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			assert.Nil(t, h)
			assert.Equal(t, 0, m.Stats().Registrations, "nothing registered")
		})
	}
	h, err := headerbuf.New(nil, 64, 1)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "no domain")
	assert.Nil(t, h)
}

func TestConcurrentGetReturn(t *testing.T) {
	const (
		goroutines = 6
		perG       = 3000
		slots      = 8
	)
	h, _ := newHeaderBuffer(t, 64, slots)
	var (
		mu       sync.Mutex
		returned = make(map[uint64]int, goroutines*perG)
		wg       sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			var hdr [16]byte
			held := make([]headerbuf.Result, 0, 4)
			var keys []uint64
			giveBack := func() {
				for _, r := range held {
					// The slot still holds our header: no one else got it.
					want := uint64FromBytes(r.Header)
					key, st := h.ReturnHeader(r.Index)
					if assert.Equal(t, netio.OK, st) {
						assert.Equal(t, want, key)
						keys = append(keys, key)
					}
				}
				held = held[:0]
			}
			for i := range perG {
				key := uint64(g)<<32 | uint64(i)
				putUint64(hdr[:8], key)
				for {
					r := h.GetHeader(hdr[:8], key)
					if r.Status == netio.OK {
						assert.Equal(t, hdr[:8], r.Header)
						held = append(held, r)
						break
					}
					assert.Equal(t, netio.NoResources, r.Status)
					giveBack() // let others (or ourselves) proceed
					runtime.Gosched()
				}
				if len(held) == cap(held) || i%3 == 0 {
					giveBack()
				}
				if i%500 == 0 {
					_ = h.NumAvailable()
					_ = h.PendingSends()
				}
			}
			giveBack()
			mu.Lock()
			for _, k := range keys {
				returned[k]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()

	assert.Len(t, returned, goroutines*perG, "every key returned")
	for k, n := range returned {
		if n != 1 {
			assert.Equal(t, 1, n, "key %#x returned %d times", k, n)
		}
	}
	assert.Empty(t, h.PendingSends())
	h.NumAvailable() // the minimum of the busy interval, which may be anything
	assert.Equal(t, slots, h.NumAvailable(), "all free again")
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func uint64FromBytes(b []byte) uint64 {
	var v uint64
	for i := range min(8, len(b)) {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

func TestGetReturnDoesNotAllocate(t *testing.T) {
	h, _ := newHeaderBuffer(t, 64, 4)
	hdr := make([]byte, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		r := h.GetHeader(hdr, 1)
		_, _ = h.ReturnHeader(r.Index)
	})
	assert.Zero(t, allocs)
}

func BenchmarkGetReturnHeader(b *testing.B) {
	h, _ := newHeaderBuffer(b, 64, 64)
	hdr := slices.Repeat([]byte{0x5a}, 64)
	b.SetBytes(int64(len(hdr)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := h.GetHeader(hdr, uint64(i))
		if r.Status != netio.OK {
			b.Fatal(r.Status)
		}
		if _, st := h.ReturnHeader(r.Index); st != netio.OK {
			b.Fatal(st)
		}
	}
}

func BenchmarkGetReturnHeaderParallel(b *testing.B) {
	h, _ := newHeaderBuffer(b, 64, 64)
	hdr := slices.Repeat([]byte{0x5a}, 64)
	b.SetBytes(int64(len(hdr)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := h.GetHeader(hdr, 1)
			if r.Status != netio.OK {
				continue // all 64 taken by others: possible only with > 64 goroutines
			}
			_, _ = h.ReturnHeader(r.Index)
		}
	})
}
