package sendbuf_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

const me, other = 1, 2

func newPool(t testing.TB, size, count int) (*sendbuf.Pool, *domain.Manager) {
	t.Helper()
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	p, err := sendbuf.NewPool(m, size, count)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, p.Close())
		assert.NoError(t, m.Close())
	})
	return p, m
}

func TestPoolLayout(t *testing.T) {
	p, m := newPool(t, 100, 4)
	assert.Equal(t, 1, m.Stats().Registrations, "one registration for all buffers")
	seen := map[uintptr]bool{}
	for i := range 4 {
		b := p.Get(me)
		require.NotNil(t, b)
		assert.Equal(t, uint64(i), b.ID(), "low IDs first")
		assert.Len(t, b.Bytes(), 100)
		assert.Zero(t, b.Addr()%64, "cache-line aligned")
		assert.False(t, seen[b.Addr()])
		seen[b.Addr()] = true
		b.Bytes()[99] = 0xff // writable to the last byte
	}
	assert.Nil(t, p.Get(me), "empty")
	for i := range 4 {
		assert.Equal(t, netio.OK, p.Release(uint64(i), me))
	}
}

func TestPoolOwnership(t *testing.T) {
	p, _ := newPool(t, 64, 2)
	b := p.Get(me)
	assert.Equal(t, netio.InvalidArgument, p.Release(b.ID(), other), "someone else's buffer")
	assert.False(t, p.MarkPosted(b, other))
	assert.False(t, p.Complete(b.ID(), me), "not posted")
	require.True(t, p.MarkPosted(b, me))
	assert.False(t, p.MarkPosted(b, me), "already posted")
	assert.Equal(t, netio.InvalidArgument, p.Release(b.ID(), me), "posted buffers are not released")
	assert.Equal(t, []uint64{b.ID()}, p.Posted(nil, me))
	assert.Empty(t, p.Posted(nil, other))
	assert.ErrorIs(t, p.Close(), netio.ErrNoResources, "a posted buffer")
	assert.True(t, p.Complete(b.ID(), me))
	assert.False(t, p.Complete(b.ID(), me), "never twice")
	assert.Equal(t, 2, p.Free())

	c := p.Get(me)
	d := p.Get(other)
	assert.Equal(t, 1, p.Reclaim(me), "only my leased buffer")
	assert.Equal(t, netio.InvalidArgument, p.Release(c.ID(), me), "reclaimed")
	assert.Equal(t, netio.OK, p.Release(d.ID(), other))
	assert.Equal(t, netio.InvalidArgument, p.Release(99, me), "unknown ID")
}

func TestPoolConcurrentUse(t *testing.T) {
	p, _ := newPool(t, 64, 8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			holder := uint64(10 + g)
			for range 5000 {
				b := p.Get(holder)
				if b == nil {
					continue
				}
				if !p.MarkPosted(b, holder) || !p.Complete(b.ID(), holder) {
					t.Errorf("buffer %d lost its state", b.ID())
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 8, p.Free())
}

func TestNewPoolRejectsBadSizes(t *testing.T) {
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer m.Close()
	for _, c := range [][2]int{{0, 4}, {64, 0}, {-1, 4}, {netio.MaxBufferSize + 1, 1}} {
		_, err := sendbuf.NewPool(m, c[0], c[1])
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "%v", c)
	}
	assert.Zero(t, m.Stats().Registrations)
}

// BenchmarkGetPostComplete is the pool's share of the send path.
func BenchmarkGetPostComplete(b *testing.B) {
	p, _ := newPool(b, 4096, 64)
	benchGetPostComplete(b, p)
}

func benchGetPostComplete(b *testing.B, p *sendbuf.Pool) {
	b.ReportAllocs()
	for b.Loop() {
		buf := p.Get(me)
		p.MarkPosted(buf, me)
		p.Complete(buf.ID(), me)
	}
}

// A buffer a caller still holds when the pool closes stays writable: the
// registration goes, the mapping stays while the buffer is reachable.
func TestCloseWithLeasedBufferKeepsMemory(t *testing.T) {
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, m.Close()) }()
	p, err := sendbuf.NewPool(m, 4096, 2)
	require.NoError(t, err)
	b := p.Get(me)
	require.NoError(t, p.Close())
	assert.Zero(t, m.Stats().Registrations, "deregistered at Close")
	b.Bytes()[4095] = 7 // would fault if Close had unmapped it
	assert.Nil(t, p.Get(me), "a closed pool hands out nothing")
	assert.Equal(t, netio.OK, p.Release(b.ID(), me), "the holder can still give it back")
}

// leaseSource opens a domain and a pool.Pool in it; at cleanup the pool is
// closed and every registration must be gone.
func leaseSource(t *testing.T, cfg pool.Config) *pool.Pool {
	t.Helper()
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	src, err := pool.New(m, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, src.Close())
		assert.Zero(t, m.Stats().Registrations, "registrations left behind")
		assert.NoError(t, m.Close())
	})
	return src
}

func leased(src *pool.Pool) int { return src.Stats().InUse() }

func TestPoolFromLeases(t *testing.T) {
	src := leaseSource(t, pool.Config{NumTiers: 2, PerTier: 4, FirstSize: 64, SizeMultiple: 4})
	p, err := sendbuf.NewPoolFrom(src, 100, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, leased(src), "one lease per buffer")
	assert.Equal(t, 4, src.Stats().Tiers[1].InUse, "from the 256-byte tier: 64 bytes are too few")
	assert.Equal(t, 100, p.BufferSize())
	descs := map[uintptr]bool{}
	for i := range 4 {
		b := p.Get(me)
		require.NotNil(t, b)
		assert.Equal(t, uint64(i), b.ID(), "low IDs first")
		assert.Len(t, b.Bytes(), 100)
		assert.Equal(t, 100, cap(b.Bytes()), "cannot reach past the buffer")
		descs[b.Desc()] = true
		b.Bytes()[99] = 0xff
	}
	assert.Len(t, descs, 4, "each buffer has its own registration")
	for i := range 4 {
		require.Equal(t, netio.OK, p.Release(uint64(i), me))
	}
	require.NoError(t, p.Close())
	assert.Zero(t, leased(src), "Close hands every lease back")
	assert.NoError(t, p.Close(), "idempotent")
	assert.Zero(t, leased(src), "nothing released twice")
}

func TestPoolFromRefusesBadInput(t *testing.T) {
	src := leaseSource(t, pool.Config{Access: domain.AccessRecv, Size: 64, Count: 4})
	_, err := sendbuf.NewPoolFrom(src, 64, 2)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "a pool without send access")
	_, err = sendbuf.NewPoolFrom(nil, 64, 2)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "no pool")
	sendPool := leaseSource(t, pool.Config{Size: 64, Count: 2, Budget: 3 * 64})
	for _, c := range [][2]int{{0, 2}, {64, 0}, {-1, 2}, {64, -1}} {
		_, err := sendbuf.NewPoolFrom(sendPool, c[0], c[1])
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "%v", c)
	}
	_, err = sendbuf.NewPoolFrom(sendPool, 64, 4)
	assert.ErrorIs(t, err, netio.ErrNoResources, "the budget holds 3 buffers")
	assert.Zero(t, leased(sendPool), "all or none: the 3 leased went back")
	assert.Zero(t, leased(src))
}

// TestPoolFromHeldBuffersAtClose: at Close a buffer the caller still holds
// keeps its lease, so src cannot give its memory to another borrower; it
// goes back when the caller releases it. A posted buffer makes Close fail
// and change nothing.
func TestPoolFromHeldBuffersAtClose(t *testing.T) {
	src := leaseSource(t, pool.Config{Size: 64, Count: 3})
	p, err := sendbuf.NewPoolFrom(src, 64, 3)
	require.NoError(t, err)
	posted, held := p.Get(me), p.Get(me)
	require.True(t, p.MarkPosted(posted, me))
	assert.ErrorIs(t, p.Close(), netio.ErrNoResources)
	assert.Equal(t, 3, leased(src), "a failed Close keeps every lease")
	require.True(t, p.Complete(posted.ID(), me))

	require.NoError(t, p.Close())
	assert.Equal(t, 1, leased(src), "the held buffer's lease stays")
	others := make([]pool.Buffer, 2)
	for i := range others {
		var st netio.Status
		others[i], st = src.TryGet(64)
		require.Equal(t, netio.OK, st)
	}
	_, st := src.TryGet(64)
	assert.Equal(t, netio.NoResources, st, "the held buffer is not handed out")
	held.Bytes()[63] = 1 // still the caller's to write
	assert.Equal(t, netio.OK, p.Release(held.ID(), me))
	assert.Equal(t, 2, leased(src), "released by the caller: back in src")
	assert.Equal(t, netio.InvalidArgument, p.Release(held.ID(), me), "not twice")
	assert.Equal(t, 2, leased(src))
	for _, b := range others {
		b.Release()
	}
	assert.Equal(t, 3, src.Stats().Tiers[0].Free)
}

// BenchmarkGetPostCompleteLeased is BenchmarkGetPostComplete over leased
// buffers: just as free of allocations.
func BenchmarkGetPostCompleteLeased(b *testing.B) {
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(b, err)
	defer m.Close()
	src, err := pool.New(m, pool.Config{Size: 4096, Count: 64})
	require.NoError(b, err)
	defer src.Close()
	p, err := sendbuf.NewPoolFrom(src, 4096, 64)
	require.NoError(b, err)
	defer p.Close()
	benchGetPostComplete(b, p)
}

// TestPoolFromDroppedBufferGoesBack: a buffer held at Close and never
// released goes back to src once it and its pool are unreachable.
func TestPoolFromDroppedBufferGoesBack(t *testing.T) {
	src := leaseSource(t, pool.Config{Size: 64, Count: 2})
	func() { // p and the held buffer are unreachable after this returns
		p, err := sendbuf.NewPoolFrom(src, 64, 2)
		require.NoError(t, err)
		require.NotNil(t, p.Get(me))
		require.NoError(t, p.Close())
	}()
	assert.Equal(t, 1, leased(src), "held at Close")
	deadline := time.Now().Add(5 * time.Second)
	for leased(src) != 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Zero(t, leased(src), "back in src once unreachable")
}
