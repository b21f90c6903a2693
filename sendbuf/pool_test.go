package sendbuf_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
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
