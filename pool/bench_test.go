package pool_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pool"
)

func benchPool(b *testing.B, count int) *pool.Pool {
	b.Helper()
	p, _ := newPool(b, pool.Config{NumTiers: 3, PerTier: count, FirstSize: 1024, SizeMultiple: 4})
	return p
}

// BenchmarkTryGetRelease is the uncontended hot path: lease and give back.
func BenchmarkTryGetRelease(b *testing.B) {
	p := benchPool(b, 16)
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		buf, st := p.TryGet(4096)
		if st != netio.OK {
			b.Fatal(st)
		}
		buf.Release()
	}
}

// BenchmarkGetRelease is Get when a buffer is free (it does not wait).
func BenchmarkGetRelease(b *testing.B) {
	p := benchPool(b, 16)
	ctx := context.Background()
	b.SetBytes(4096)
	b.ReportAllocs()
	for b.Loop() {
		buf, err := p.Get(ctx, 4096)
		if err != nil {
			b.Fatal(err)
		}
		buf.Release()
	}
}

// BenchmarkTryGetReleaseParallel has every P lease and give back buffers of
// one tier at once: the tier's mutex is contended.
func BenchmarkTryGetReleaseParallel(b *testing.B) {
	p := benchPool(b, 64)
	var misses atomic.Int64
	b.SetBytes(4096)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			buf, st := p.TryGet(4096)
			if st != netio.OK {
				misses.Add(1)
				continue
			}
			buf.Release()
		}
	})
	if n := misses.Load(); n > 0 {
		b.Errorf("%d TryGets found no buffer", n)
	}
}

// BenchmarkGetOrExtendRelease is GetOrExtend when a buffer is free.
func BenchmarkGetOrExtendRelease(b *testing.B) {
	p := benchPool(b, 16)
	b.ReportAllocs()
	for b.Loop() {
		buf, err := p.GetOrExtend(4096)
		if err != nil {
			b.Fatal(err)
		}
		buf.Release()
	}
}

// BenchmarkRefRelease takes and gives back a second handle of a leased
// buffer: handles are values, so Ref does not allocate either.
func BenchmarkRefRelease(b *testing.B) {
	p := benchPool(b, 1)
	buf, st := p.TryGet(4096)
	if st != netio.OK {
		b.Fatal(st)
	}
	defer buf.Release()
	b.ReportAllocs()
	for b.Loop() {
		r := buf.Ref()
		if !r.Valid() {
			b.Fatal("Ref refused")
		}
		r.Release()
	}
}
