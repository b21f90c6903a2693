package domain_test

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

// The benchmarks share one tcp domain and one region of memory, opened by
// the first of them, so the hit/pair ratio compares like with like. The
// domain stays open until the process exits: closing it would need a
// TestMain, which the package's other tests do not want.
var bench struct {
	once sync.Once
	m    *domain.Manager
	addr uintptr
	err  error
}

const benchRegion = 64 << 10

func benchDomain(b *testing.B) (*domain.Manager, uintptr) {
	b.Helper()
	bench.once.Do(func() {
		bench.m, bench.err = domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
		if bench.err != nil {
			return
		}
		var mem []byte
		if mem, bench.err = domain.Alloc(benchRegion); bench.err == nil {
			bench.addr = uintptr(unsafe.Pointer(&mem[0]))
		}
	})
	require.NoError(b, bench.err)
	require.Zero(b, bench.m.Stats().Registrations, "a previous benchmark leaked registrations")
	return bench.m, bench.addr
}

// BenchmarkRegisterDeregister is the cost a cache hit must beat: one plain
// registration and deregistration of a 64 KiB range.
// warmCache returns a cache holding the whole benchmark region as a stale
// entry, so that acquires inside it hit. It is closed when b ends.
func warmCache(b *testing.B, m *domain.Manager, addr uintptr) *domain.RegistrationCache {
	c, err := m.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, c.Close()) })
	r, err := c.Acquire(addr, benchRegion)
	require.NoError(b, err)
	c.Release(r)
	return c
}

func BenchmarkRegisterDeregister(b *testing.B) {
	m, addr := benchDomain(b)
	b.SetBytes(benchRegion)
	b.ReportAllocs()
	for b.Loop() {
		reg, err := m.Register(addr, benchRegion, domain.AccessSend)
		if err != nil {
			b.Fatal(err)
		}
		if err := reg.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheHit acquires and releases a 4 KiB range inside a cached
// 64 KiB registration: the steady state of zero-copy sends from one buffer.
func BenchmarkCacheHit(b *testing.B) {
	m, addr := benchDomain(b)
	c := warmCache(b, m, addr)
	b.SetBytes(benchRegion)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Acquire(addr+4096, 4096)
		if err != nil {
			b.Fatal(err)
		}
		c.Release(r)
	}
	b.StopTimer()
	st := c.Stats()
	require.Equal(b, uint64(1), st.Misses, "every iteration must hit")
}

// BenchmarkCacheHitParallel is BenchmarkCacheHit from every core at once on
// the same registration: the fast path's atomics under contention.
func BenchmarkCacheHitParallel(b *testing.B) {
	m, addr := benchDomain(b)
	c := warmCache(b, m, addr)
	b.SetBytes(benchRegion)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := c.Acquire(addr+4096, 4096)
			if err != nil {
				b.Error(err)
				return
			}
			c.Release(r)
		}
	})
}

// BenchmarkCacheHitAlternating alternates between two cached registrations,
// so every hit takes the locked slow path (only the most recently acquired
// entry is on the fast path).
func BenchmarkCacheHitAlternating(b *testing.B) {
	m, addr := benchDomain(b)
	c, err := m.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(b, err)
	defer func() { require.NoError(b, c.Close()) }()
	half := benchRegion / 2
	for i := range 2 {
		r, err := c.Acquire(addr+uintptr(i*half), half)
		require.NoError(b, err)
		c.Release(r)
	}
	b.SetBytes(int64(half))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, err := c.Acquire(addr+uintptr(i*half), 4096)
		if err != nil {
			b.Fatal(err)
		}
		c.Release(r)
		i ^= 1
	}
	b.StopTimer()
	require.Equal(b, uint64(2), c.Stats().Misses, "every iteration must hit")
}

// BenchmarkCacheMiss is a miss every time: with StaleLimit -1 the last
// release deregisters, so each Acquire registers anew. It is the cache's
// overhead over BenchmarkRegisterDeregister.
func BenchmarkCacheMiss(b *testing.B) {
	m, addr := benchDomain(b)
	c, err := m.NewRegistrationCache(domain.CacheConfig{StaleLimit: -1})
	require.NoError(b, err)
	defer func() { require.NoError(b, c.Close()) }()
	b.SetBytes(benchRegion)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Acquire(addr, benchRegion)
		if err != nil {
			b.Fatal(err)
		}
		c.Release(r)
	}
	b.StopTimer()
	require.Zero(b, c.Stats().Hits, "every iteration must miss")
}
