package domain_test

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

var page = uintptr(os.Getpagesize())

// rcMemory maps n pages outside the Go heap and returns their address. It
// is unmapped at the end of the test, after the cache and domain opened
// later in the test are closed (cleanups run last-in, first-out).
func rcMemory(t *testing.T, pages int) uintptr {
	t.Helper()
	mem, err := domain.Alloc(pages * int(page))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, domain.Free(mem)) })
	return uintptr(unsafe.Pointer(&mem[0]))
}

// rcOpen opens a tcp domain on loopback and a cache on it. At the end of
// the test the cache must close and leave no registration behind.
func rcOpen(t *testing.T, dcfg domain.Config, cfg domain.CacheConfig) (*domain.Manager, *domain.RegistrationCache) {
	t.Helper()
	dcfg.Provider, dcfg.Address = "tcp", "127.0.0.1"
	m, err := domain.Open(dcfg)
	require.NoError(t, err)
	c, err := m.NewRegistrationCache(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, c.Close())
		assert.Zero(t, m.Stats().Registrations, "the cache left registrations behind")
		assert.NoError(t, m.Close())
	})
	return m, c
}

func acquire(t *testing.T, c *domain.RegistrationCache, addr uintptr, n int) *domain.CachedRegistration {
	t.Helper()
	r, err := c.Acquire(addr, n)
	require.NoError(t, err)
	require.NotNil(t, r)
	require.LessOrEqual(t, r.Addr(), addr, "the registration must contain the request")
	require.GreaterOrEqual(t, r.Addr()+uintptr(r.Len()), addr+uintptr(n), "the registration must contain the request")
	return r
}

func TestCacheHitInsideExistingRange(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})

	r := acquire(t, c, base, int(16*page))
	assert.Equal(t, base, r.Addr())
	assert.Equal(t, int(16*page), r.Len())
	assert.Equal(t, domain.CacheStats{Misses: 1, InUse: 1}, c.Stats())

	// In use: a second user of a range inside shares the entry.
	r2 := acquire(t, c, base+page, int(page))
	assert.Same(t, r, r2)
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 1, InUse: 1}, c.Stats())
	c.Release(r2)
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 1, InUse: 1}, c.Stats(), "one user is left")
	c.Release(r)
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 1, Stale: 1}, c.Stats())

	// Stale: reuse it, down to the last byte of the range.
	r3 := acquire(t, c, base+16*page-1, 1)
	assert.Same(t, r, r3)
	assert.Equal(t, domain.CacheStats{Hits: 2, Misses: 1, InUse: 1}, c.Stats())
	assert.Equal(t, 1, m.Stats().Registrations, "hits register nothing")
	assert.NotZero(t, r3.Key())
	c.Release(r3)
}

func TestCacheMissOutsideExistingRanges(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})

	a := acquire(t, c, base, int(4*page))
	b := acquire(t, c, base+8*page, int(4*page)) // disjoint
	d := acquire(t, c, base, int(4*page)+1)      // one byte past a
	assert.NotSame(t, a, b)
	assert.NotSame(t, a, d)
	assert.Equal(t, int(4*page)+1, d.Len())
	assert.Equal(t, domain.CacheStats{Misses: 3, InUse: 3}, c.Stats())
	assert.Equal(t, 3, m.Stats().Registrations)
	for _, r := range []*domain.CachedRegistration{a, b, d} {
		c.Release(r)
	}
	assert.Equal(t, domain.CacheStats{Misses: 3, Stale: 3}, c.Stats())
}

func TestCacheMergeOnOff(t *testing.T) {
	for _, merge := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[merge]
		t.Run(name, func(t *testing.T) {
			base := rcMemory(t, 16)
			m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{Merge: merge})

			a := acquire(t, c, base, int(4*page))
			c.Release(a)
			b := acquire(t, c, base+4*page, int(4*page)) // adjacent to a
			d := acquire(t, c, base+6*page, int(4*page)) // overlaps b
			st := c.Stats()
			if !merge {
				assert.Equal(t, base+4*page, b.Addr())
				assert.Equal(t, int(4*page), b.Len())
				assert.Equal(t, base+6*page, d.Addr())
				assert.Equal(t, domain.CacheStats{Misses: 3, InUse: 2, Stale: 1}, st)
				assert.Equal(t, 3, m.Stats().Registrations, "overlapping entries coexist")
				c.Release(b)
				c.Release(d)
				assert.Equal(t, 3, c.Stats().Stale)
				return
			}
			// b absorbed the stale a: one registration of [0, 8 pages).
			assert.Equal(t, base, b.Addr())
			assert.Equal(t, int(8*page), b.Len())
			// d absorbed b, which is in use: b stays registered until released.
			assert.Equal(t, base, d.Addr())
			assert.Equal(t, int(10*page), d.Len())
			assert.Equal(t, domain.CacheStats{Misses: 3, Merges: 2, InUse: 2}, st)
			assert.Equal(t, 2, m.Stats().Registrations, "a was deregistered, b lives until released")

			c.Release(b)
			assert.Equal(t, 1, m.Stats().Registrations, "the absorbed b went at its release, not to the stale set")
			assert.Equal(t, domain.CacheStats{Misses: 3, Merges: 2, InUse: 1}, c.Stats())

			// Anything inside the union now hits the one registration.
			e := acquire(t, c, base+page, int(8*page))
			assert.Same(t, d, e)
			c.Release(e)
			c.Release(d)
			assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 3, Merges: 2, Stale: 1}, c.Stats())
			assert.Equal(t, 1, m.Stats().Registrations)
		})
	}
}

func TestCacheMergeFallsBackWhenTheUnionIsRefused(t *testing.T) {
	base := rcMemory(t, 16)
	// Room for 3 pages registered: a (2 pages) stays, so the union
	// (3 pages, 5 in all) does not fit, the request alone (1 page) does.
	m, c := rcOpen(t, domain.Config{MaxRegisteredBytes: int64(3 * page)}, domain.CacheConfig{Merge: true})
	a := acquire(t, c, base, int(2*page))
	b := acquire(t, c, base+2*page, int(page))
	assert.Equal(t, base+2*page, b.Addr(), "not merged")
	assert.Equal(t, int(page), b.Len())
	assert.Equal(t, domain.CacheStats{Misses: 2, InUse: 2}, c.Stats())
	assert.Equal(t, 2, m.Stats().Registrations)
	c.Release(a)
	c.Release(b)
}

func TestCacheStaleLRUEviction(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{StaleLimit: 2})
	at := func(i int) uintptr { return base + uintptr(i)*2*page } // disjoint ranges
	a := acquire(t, c, at(0), int(page))
	b := acquire(t, c, at(1), int(page))
	d := acquire(t, c, at(2), int(page))
	c.Release(a)
	c.Release(b)
	assert.Equal(t, domain.CacheStats{Misses: 3, InUse: 1, Stale: 2}, c.Stats())

	// Use a again: b is now the least recently used stale entry.
	a = acquire(t, c, at(0), int(page))
	c.Release(a)
	c.Release(d) // three stale: over the limit, b goes
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 3, Evictions: 1, Stale: 2}, c.Stats())
	assert.Equal(t, 2, m.Stats().Registrations)

	// Hold each while checking the next, so the checks evict nothing.
	var held []*domain.CachedRegistration
	for i, hit := range []bool{true, false, true} { // a kept, b evicted, d kept
		before := c.Stats()
		held = append(held, acquire(t, c, at(i), int(page)))
		after := c.Stats()
		if hit {
			assert.Equal(t, before.Hits+1, after.Hits, "range %d must hit", i)
		} else {
			assert.Equal(t, before.Misses+1, after.Misses, "range %d must miss", i)
		}
	}
	for _, r := range held {
		c.Release(r)
	}
}

func TestCacheStaleLimitCountsTheFastPath(t *testing.T) {
	// The last entry acquired is released without the lock; it must still
	// count against the stale limit and in LRU order.
	base := rcMemory(t, 4)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{StaleLimit: 1})
	a := acquire(t, c, base, int(page))
	c.Release(a)
	assert.Equal(t, domain.CacheStats{Misses: 1, Stale: 1}, c.Stats())
	b := acquire(t, c, base+2*page, int(page))
	c.Release(b) // a is older: it goes
	assert.Equal(t, domain.CacheStats{Misses: 2, Evictions: 1, Stale: 1}, c.Stats())
	assert.Equal(t, 1, m.Stats().Registrations)
	c.Release(acquire(t, c, base+2*page, int(page)))
	assert.Equal(t, uint64(1), c.Stats().Hits, "b was kept")
}

func TestCacheNoStaleEntries(t *testing.T) {
	base := rcMemory(t, 4)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{StaleLimit: -1})
	r := acquire(t, c, base, int(page))
	r2 := acquire(t, c, base, int(page))
	c.Release(r)
	assert.Equal(t, 1, m.Stats().Registrations, "a user is left")
	c.Release(r2)
	assert.Equal(t, 0, m.Stats().Registrations, "deregistered at the last release")
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 1, Evictions: 1}, c.Stats())
}

func TestCacheHardLimit(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{MaxRegistrations: 2})
	at := func(i int) uintptr { return base + uintptr(i)*2*page }
	a := acquire(t, c, at(0), int(page))
	b := acquire(t, c, at(1), int(page))
	c.Release(b)
	c.Release(a) // stale, LRU first: b, then a

	d := acquire(t, c, at(2), int(page)) // evicts b, the least recently used
	assert.Equal(t, domain.CacheStats{Misses: 3, Evictions: 1, InUse: 1, Stale: 1}, c.Stats())
	assert.Equal(t, 2, m.Stats().Registrations)
	a = acquire(t, c, at(0), int(page))
	assert.Equal(t, uint64(1), c.Stats().Hits, "a was kept")

	// Only in-use entries left: refused, and nothing changed.
	cst, mst := c.Stats(), m.Stats()
	_, err := c.Acquire(at(3), int(page))
	require.Error(t, err)
	assert.ErrorIs(t, err, netio.ErrNoResources)
	assert.Equal(t, cst, c.Stats())
	assert.Equal(t, mst, m.Stats())

	// A hit needs no room.
	a2 := acquire(t, c, at(0), int(page))
	c.Release(a2)
	c.Release(a)
	c.Release(d)
}

func TestCacheEvictsWhenTheDomainRefuses(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{MaxRegistrations: 2}, domain.CacheConfig{})
	at := func(i int) uintptr { return base + uintptr(i)*2*page }
	a := acquire(t, c, at(0), int(page))
	c.Release(a)
	b := acquire(t, c, at(1), int(page))

	d := acquire(t, c, at(2), int(page)) // the domain is full: a is evicted
	assert.Equal(t, domain.CacheStats{Misses: 3, Evictions: 1, InUse: 2}, c.Stats())
	assert.Equal(t, 2, m.Stats().Registrations)

	cst, mst := c.Stats(), m.Stats()
	_, err := c.Acquire(at(3), int(page))
	assert.ErrorIs(t, err, netio.ErrNoResources, "nothing stale to evict")
	assert.Equal(t, cst, c.Stats())
	assert.Equal(t, mst.Registrations, m.Stats().Registrations)
	c.Release(b)
	c.Release(d)
}

func TestCacheInvalidate(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})
	stale := acquire(t, c, base, int(2*page))
	c.Release(stale)
	keep := acquire(t, c, base+8*page, int(2*page))
	inUse := acquire(t, c, base+2*page, int(2*page)) // adjacent to stale; the hot entry

	assert.Zero(t, c.Invalidate(base+4*page, int(4*page)), "adjacent ranges do not touch")
	assert.Equal(t, 2, c.Invalidate(base+page, int(2*page)), "touches stale and inUse")
	assert.Equal(t, domain.CacheStats{Misses: 3, InUse: 2}, c.Stats(), "inUse stays until released")
	assert.Equal(t, 2, m.Stats().Registrations, "stale deregistered now")

	// A new Acquire of the range registers anew, even while the old entry is held.
	again := acquire(t, c, base+2*page, int(2*page))
	assert.NotSame(t, inUse, again)
	assert.Equal(t, uint64(4), c.Stats().Misses)
	c.Release(inUse)
	assert.Equal(t, 2, m.Stats().Registrations, "inUse deregistered at its release")
	assert.Equal(t, domain.CacheStats{Misses: 4, InUse: 2}, c.Stats())
	c.Release(inUse) // once too often: ignored
	assert.Equal(t, domain.CacheStats{Misses: 4, InUse: 2}, c.Stats())
	c.Release(again)
	c.Release(keep)
	assert.Equal(t, domain.CacheStats{Misses: 4, Stale: 2}, c.Stats())

	assert.Zero(t, c.Invalidate(0, 10))
	assert.Zero(t, c.Invalidate(base, 0))
}

func TestCacheReallocatedAtTheSameAddress(t *testing.T) {
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})
	const size = 1 << 20
	mem, err := domain.Alloc(size)
	require.NoError(t, err)
	addr := uintptr(unsafe.Pointer(&mem[0]))
	r := acquire(t, c, addr, size)
	c.Release(r)
	assert.Equal(t, 1, c.Invalidate(addr, size))
	require.NoError(t, domain.Free(mem))

	mem, err = domain.Alloc(size)
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(mem)) }()
	addr2 := uintptr(unsafe.Pointer(&mem[0]))
	if addr2 != addr {
		t.Logf("mmap returned another address (%#x, was %#x): the test still checks a miss", addr2, addr)
	}
	r = acquire(t, c, addr2, size)
	assert.Equal(t, domain.CacheStats{Misses: 2, InUse: 1}, c.Stats(), "registered anew")
	assert.Equal(t, 1, m.Stats().Registrations)
	c.Release(r)
	require.Equal(t, 1, c.Invalidate(addr2, size))
}

func TestCacheFlush(t *testing.T) {
	base := rcMemory(t, 16)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})
	a := acquire(t, c, base, int(page))
	b := acquire(t, c, base+2*page, int(page))
	d := acquire(t, c, base+4*page, int(page))
	c.Release(a)
	c.Release(d) // the hot entry, released on the fast path
	require.NoError(t, c.Flush())
	assert.Equal(t, domain.CacheStats{Misses: 3, InUse: 1}, c.Stats())
	assert.Equal(t, 1, m.Stats().Registrations, "b is in use")
	c.Release(acquire(t, c, base, int(page)))
	assert.Equal(t, uint64(4), c.Stats().Misses, "flushed entries register anew")
	c.Release(b)
	require.NoError(t, c.Flush())
	assert.Zero(t, m.Stats().Registrations)
}

func TestCacheClose(t *testing.T) {
	base := rcMemory(t, 4)
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	c, err := m.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)
	r := acquire(t, c, base, int(page))
	c.Release(acquire(t, c, base+2*page, int(page)))

	before := c.Stats()
	err = c.Close()
	assert.ErrorIs(t, err, domain.ErrRegistrationsAlive)
	assert.Equal(t, before, c.Stats(), "a refused Close changes nothing")
	assert.Equal(t, 2, m.Stats().Registrations)
	r2 := acquire(t, c, base, int(page)) // still usable
	assert.Same(t, r, r2)
	c.Release(r2)
	c.Release(r)

	require.NoError(t, c.Close())
	assert.Zero(t, m.Stats().Registrations)
	require.NoError(t, c.Close(), "idempotent")
	_, err = c.Acquire(base, int(page))
	assert.ErrorIs(t, err, netio.ErrClosed)
	c.Release(r) // ignored
	assert.Zero(t, c.Invalidate(base, int(page)))
	assert.NoError(t, c.Flush())
	assert.Zero(t, m.Stats().Registrations)
	require.NoError(t, m.Close())
}

func TestCacheBadInput(t *testing.T) {
	base := rcMemory(t, 4)
	m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{})
	_, err := m.NewRegistrationCache(domain.CacheConfig{MaxRegistrations: -1})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)

	hot := acquire(t, c, base, int(4*page)) // the fast path sees every request below first
	for _, tc := range []struct {
		addr uintptr
		n    int
	}{{0, 10}, {base, 0}, {base, -1}, {^uintptr(0) - 10, 100}, {base + page, -int(page)}} {
		_, err := c.Acquire(tc.addr, tc.n)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "Acquire(%#x, %d)", tc.addr, tc.n)
	}
	assert.Equal(t, domain.CacheStats{Misses: 1, InUse: 1}, c.Stats())

	// Releases that do not match an Acquire are ignored.
	c.Release(nil)
	other, err := m.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)
	other.Release(hot)
	assert.Equal(t, domain.CacheStats{Misses: 1, InUse: 1}, c.Stats(), "another cache's entry")
	require.NoError(t, other.Close())
	c.Release(hot)
	c.Release(hot)
	assert.Equal(t, domain.CacheStats{Misses: 1, Stale: 1}, c.Stats())
	r := acquire(t, c, base, int(page))
	assert.Same(t, hot, r)
	assert.Equal(t, domain.CacheStats{Hits: 1, Misses: 1, InUse: 1}, c.Stats(), "the count never went below zero")
	c.Release(r)
	assert.Equal(t, 1, m.Stats().Registrations)
}

func TestCacheConcurrent(t *testing.T) {
	for _, merge := range []bool{false, true} {
		t.Run(map[bool]string{false: "separate", true: "merge"}[merge], func(t *testing.T) {
			const pages, workers, iterations, limit, staleLimit = 32, 8, 2000, 6, 3
			base := rcMemory(t, pages)
			m, c := rcOpen(t, domain.Config{}, domain.CacheConfig{MaxRegistrations: limit, StaleLimit: staleLimit, Merge: merge})

			var acquired, refused, invalidated sync.Map // per worker counts
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					var ok, no, inv int
					var held []*domain.CachedRegistration
					for i := range iterations {
						off := uintptr(rng.IntN(pages-4)) * page
						n := 1 + rng.IntN(int(3*page))
						if w == 0 && i%50 == 0 {
							inv += c.Invalidate(base+off, n) // others may hold entries here
							continue
						}
						r, err := c.Acquire(base+off, n)
						if err != nil {
							if !assert.ErrorIs(t, err, netio.ErrNoResources) {
								return
							}
							no++
						} else {
							ok++
							assert.LessOrEqual(t, r.Addr(), base+off)
							assert.GreaterOrEqual(t, r.Addr()+uintptr(r.Len()), base+off+uintptr(n))
							held = append(held, r)
						}
						if len(held) > 1 || (len(held) == 1 && rng.IntN(2) == 0) {
							c.Release(held[0])
							held = held[1:]
						}
					}
					for _, r := range held {
						c.Release(r)
					}
					acquired.Store(w, ok)
					refused.Store(w, no)
					invalidated.Store(w, inv)
				}()
			}
			wg.Wait()

			sum := func(mp *sync.Map) (n int) {
				mp.Range(func(_, v any) bool { n += v.(int); return true })
				return n
			}
			st := c.Stats()
			assert.Equal(t, uint64(sum(&acquired)), st.Hits+st.Misses, "every successful Acquire is a hit or a miss")
			assert.Positive(t, st.Hits)
			assert.Zero(t, st.InUse, "everything was released")
			assert.LessOrEqual(t, st.Stale, staleLimit)
			assert.Equal(t, st.InUse+st.Stale, m.Stats().Registrations, "the domain holds exactly the cache's entries")
			assert.LessOrEqual(t, m.Stats().PeakRegistrations, limit+workers, "the hard limit held (plus evictions in flight)")
			t.Logf("%+v refused=%d invalidated=%d peak=%d", st, sum(&refused), sum(&invalidated), m.Stats().PeakRegistrations)
			if merge {
				assert.Positive(t, st.Merges)
			}
			assert.NoError(t, c.Flush())
			assert.Zero(t, m.Stats().Registrations)
		})
	}
}
