package pool_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
)

// newMgr opens a tcp domain on loopback; at cleanup every registration must
// be gone.
func newMgr(t testing.TB, cfg domain.Config) *domain.Manager {
	t.Helper()
	cfg.Provider, cfg.Address = "tcp", "127.0.0.1"
	m, err := domain.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Equal(t, 0, m.Stats().Registrations, "registrations left behind")
		assert.NoError(t, m.Close())
	})
	return m
}

// newPool opens a domain and a pool in it; the pool is closed before the
// domain's check.
func newPool(t testing.TB, cfg pool.Config) (*pool.Pool, *domain.Manager) {
	t.Helper()
	m := newMgr(t, domain.Config{})
	p, err := pool.New(m, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p, m
}

// threeTiers has tiers of 1 KiB, 4 KiB and 16 KiB with two buffers each.
var threeTiers = pool.Config{NumTiers: 3, PerTier: 2, FirstSize: 1024, SizeMultiple: 4}

// twoTiers has one buffer of 1 KiB and one of 4 KiB.
var twoTiers = pool.Config{NumTiers: 2, PerTier: 1, FirstSize: 1024, SizeMultiple: 4}

func tierStats(p *pool.Pool, size int) pool.TierStats {
	for _, ts := range p.Stats().Tiers {
		if ts.Size == size {
			return ts
		}
	}
	return pool.TierStats{Size: -1}
}

func tryGet(t *testing.T, p *pool.Pool, minSize int) pool.Buffer {
	t.Helper()
	b, st := p.TryGet(minSize)
	require.Equal(t, netio.OK, st, "TryGet(%d)", minSize)
	return b
}

// waitForWaiters waits (bounded) until n Gets are queued.
func waitForWaiters(t *testing.T, p *pool.Pool, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Stats().Waiters == n }, 2*time.Second, time.Millisecond,
		"expected %d waiters", n)
}

type result struct {
	b   pool.Buffer
	err error
}

func getAsync(p *pool.Pool, ctx context.Context, minSize int) <-chan result {
	ch := make(chan result, 1)
	go func() {
		b, err := p.Get(ctx, minSize)
		ch <- result{b, err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * time.Second):
		require.FailNow(t, "Get did not return")
		return result{}
	}
}

func assertStillWaiting(t *testing.T, ch <-chan result) {
	t.Helper()
	select {
	case r := <-ch:
		assert.Fail(t, "Get returned while it should wait", "buffer %v err %v", r.b.Valid(), r.err)
		if r.b.Valid() {
			r.b.Release()
		}
	case <-time.After(20 * time.Millisecond):
	}
}

func TestConfigValidation(t *testing.T) {
	m := newMgr(t, domain.Config{})
	bad := map[string]pool.Config{
		"no tiers":            {},
		"both layouts":        {Size: 64, Count: 1, NumTiers: 2, FirstSize: 64, SizeMultiple: 2},
		"zero size":           {Count: 2},
		"negative size":       {Size: -1, Count: 1},
		"size too large":      {Size: netio.MaxBufferSize + 1, Count: 1},
		"negative count":      {Size: 64, Count: -1},
		"zero tiers":          {PerTier: 1, FirstSize: 64, SizeMultiple: 2},
		"multiple below two":  {NumTiers: 2, PerTier: 1, FirstSize: 64, SizeMultiple: 1},
		"no first size":       {NumTiers: 2, PerTier: 1, SizeMultiple: 2},
		"tier sizes overflow": {NumTiers: 40, FirstSize: 1 << 20, SizeMultiple: 2},
		"negative budget":     {Size: 64, Count: 1, Budget: -1},
		"budget below config": {Size: 4096, Count: 4, Budget: 8192},
		"negative idle":       {Size: 64, Count: 1, IdleTimeout: -time.Second},
	}
	for name, cfg := range bad {
		p, err := pool.New(m, cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, p, name)
	}
	_, err := pool.New(nil, pool.Config{Size: 64, Count: 1})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "nil manager")
	assert.Equal(t, 0, m.Stats().Registrations, "bad config registers nothing")
}

func TestNewFailureFreesEverything(t *testing.T) {
	m := newMgr(t, domain.Config{MaxRegistrations: 3})
	_, err := pool.New(m, pool.Config{NumTiers: 2, PerTier: 2, FirstSize: 64, SizeMultiple: 2})
	assert.ErrorIs(t, err, netio.ErrNoResources, "4 registrations, limit 3")
	assert.Equal(t, 0, m.Stats().Registrations, "the ones made are undone")
}

func TestSingleTierLayout(t *testing.T) {
	p, m := newPool(t, pool.Config{Size: 1000, Count: 4})
	assert.Equal(t, 4, m.Stats().Registrations, "one registration per buffer")
	assert.Equal(t, 1000, p.MaxBufferSize())
	st := p.Stats()
	require.Len(t, st.Tiers, 1)
	assert.Equal(t, pool.TierStats{Size: 1000, Count: 4, Base: 4, Free: 4, InUse: 0, MinFree: 4}, st.Tiers[0])
	assert.Equal(t, int64(4000), st.RegisteredBytes)
	assert.Equal(t, int64(4000), st.PeakBytes)

	var held []pool.Buffer
	addrs := map[uintptr]bool{}
	for range 4 {
		b := tryGet(t, p, 1)
		held = append(held, b)
		assert.Len(t, b.Bytes(), 1000)
		assert.Equal(t, 1000, b.Size())
		assert.False(t, addrs[b.Addr()], "distinct buffers")
		addrs[b.Addr()] = true
		assert.Zero(t, b.Addr()%64, "cache-line aligned")
		reg := b.Registration()
		require.NotNil(t, reg)
		assert.Equal(t, b.Addr(), reg.Addr())
		assert.Equal(t, 1000, reg.Len())
		assert.Equal(t, domain.AccessSend, reg.Access(), "least access by default")
		assert.Equal(t, reg.Key(), b.Key())
		assert.Equal(t, reg.Desc(), b.Desc())
		b.Bytes()[999] = 0xff // writable to the last byte
	}
	_, st2 := p.TryGet(1)
	assert.Equal(t, netio.NoResources, st2)
	s := p.Stats().Tiers[0]
	assert.Equal(t, 0, s.Free)
	assert.Equal(t, 4, s.InUse)
	assert.Equal(t, 0, s.MinFree)
	for _, b := range held {
		b.Release()
	}
	s = p.Stats().Tiers[0]
	assert.Equal(t, 4, s.Free)
	assert.Equal(t, 0, s.MinFree, "minimum of the previous interval")
	assert.Equal(t, 4, p.Stats().Tiers[0].MinFree, "a new interval starts at the current count")
}

func TestMultiTierLayoutAndSmallestFit(t *testing.T) {
	p, m := newPool(t, pool.Config{NumTiers: 3, PerTier: 2, FirstSize: 1024, SizeMultiple: 4,
		Access: domain.AccessRecv})
	assert.Equal(t, 6, m.Stats().Registrations)
	assert.Equal(t, 16384, p.MaxBufferSize())
	st := p.Stats()
	require.Len(t, st.Tiers, 3)
	for i, size := range []int{1024, 4096, 16384} {
		assert.Equal(t, size, st.Tiers[i].Size)
		assert.Equal(t, 2, st.Tiers[i].Count)
	}
	assert.Equal(t, int64(2*(1024+4096+16384)), st.RegisteredBytes)

	for _, c := range []struct{ min, size int }{{0, 1024}, {1, 1024}, {1024, 1024}, {1025, 4096}, {4096, 4096}, {4097, 16384}, {16384, 16384}} {
		b := tryGet(t, p, c.min)
		assert.Equal(t, c.size, b.Size(), "TryGet(%d) picks the smallest fitting tier", c.min)
		assert.Equal(t, domain.AccessRecv, b.Registration().Access())
		b.Release()
	}
	_, s := p.TryGet(16385)
	assert.Equal(t, netio.InvalidArgument, s, "larger than every tier")
	_, s = p.TryGet(-1)
	assert.Equal(t, netio.InvalidArgument, s)
	_, err := p.Get(context.Background(), 16385)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)

	// Smallest tier empty: the next larger one serves small requests.
	a, b := tryGet(t, p, 10), tryGet(t, p, 10)
	assert.Equal(t, 1024, a.Size())
	assert.Equal(t, 1024, b.Size())
	c := tryGet(t, p, 10)
	assert.Equal(t, 4096, c.Size(), "falls through to the next tier")
	d := tryGet(t, p, 10)
	e := tryGet(t, p, 10)
	f := tryGet(t, p, 10)
	assert.Equal(t, []int{4096, 16384, 16384}, []int{d.Size(), e.Size(), f.Size()})
	_, s = p.TryGet(10)
	assert.Equal(t, netio.NoResources, s)
	a.Release()
	g := tryGet(t, p, 10)
	assert.Equal(t, a.Addr(), g.Addr(), "a released small buffer is found first")
	for _, x := range []pool.Buffer{b, c, d, e, f, g} {
		x.Release()
	}
	for _, ts := range p.Stats().Tiers {
		assert.Equal(t, 2, ts.Free)
	}
}

func TestGetWokenByRelease(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 4096, Count: 1})
	held := tryGet(t, p, 1)
	ch := getAsync(p, context.Background(), 100)
	waitForWaiters(t, p, 1)
	assertStillWaiting(t, ch)
	held.Release()
	r := receive(t, ch)
	require.NoError(t, r.err)
	assert.Equal(t, held.Addr(), r.b.Addr())
	assert.Equal(t, 1, r.b.UseCount())
	assert.Equal(t, 0, p.Stats().Waiters)
	r.b.Release()
	assert.Equal(t, 1, tierStats(p, 4096).Free)
}

// The rule: a released buffer goes to the oldest waiter it fits. Tested
// with one 1 KiB and one 4 KiB buffer.
func TestWaitersAcrossTiers(t *testing.T) {
	ctx := context.Background()
	t.Run("small waiter woken by a large release", func(t *testing.T) {
		p, _ := newPool(t, twoTiers)
		small, large := tryGet(t, p, 1), tryGet(t, p, 1)
		require.Equal(t, 4096, large.Size())
		ch := getAsync(p, ctx, 100)
		waitForWaiters(t, p, 1)
		large.Release()
		r := receive(t, ch)
		require.NoError(t, r.err)
		assert.Equal(t, 4096, r.b.Size(), "the only fitting release")
		r.b.Release()
		small.Release()
	})
	t.Run("large waiter first keeps the large release", func(t *testing.T) {
		p, _ := newPool(t, twoTiers)
		small, large := tryGet(t, p, 1), tryGet(t, p, 1)
		chL := getAsync(p, ctx, 4000)
		waitForWaiters(t, p, 1)
		chS := getAsync(p, ctx, 100)
		waitForWaiters(t, p, 2)
		large.Release()
		rL := receive(t, chL)
		require.NoError(t, rL.err)
		assert.Equal(t, 4096, rL.b.Size())
		assertStillWaiting(t, chS) // the small waiter must not have taken it
		small.Release()
		rS := receive(t, chS)
		require.NoError(t, rS.err)
		assert.Equal(t, 1024, rS.b.Size())
		rL.b.Release()
		rS.b.Release()
	})
	t.Run("small release skips a large waiter", func(t *testing.T) {
		p, _ := newPool(t, twoTiers)
		small, large := tryGet(t, p, 1), tryGet(t, p, 1)
		chL := getAsync(p, ctx, 4000)
		waitForWaiters(t, p, 1)
		chS := getAsync(p, ctx, 100)
		waitForWaiters(t, p, 2)
		small.Release() // does not fit the older large waiter: goes to the small one
		rS := receive(t, chS)
		require.NoError(t, rS.err)
		assert.Equal(t, 1024, rS.b.Size())
		assertStillWaiting(t, chL)
		large.Release()
		rL := receive(t, chL)
		require.NoError(t, rL.err)
		assert.Equal(t, 4096, rL.b.Size())
		rL.b.Release()
		rS.b.Release()
	})
	t.Run("older small waiter is served before a newer one", func(t *testing.T) {
		p, _ := newPool(t, pool.Config{Size: 1024, Count: 1})
		held := tryGet(t, p, 1)
		ch1 := getAsync(p, ctx, 1)
		waitForWaiters(t, p, 1)
		ch2 := getAsync(p, ctx, 1)
		waitForWaiters(t, p, 2)
		held.Release()
		r1 := receive(t, ch1)
		require.NoError(t, r1.err)
		assertStillWaiting(t, ch2)
		_, st := p.TryGet(1)
		assert.Equal(t, netio.NoResources, st, "no barging")
		r1.b.Release()
		r2 := receive(t, ch2)
		require.NoError(t, r2.err)
		r2.b.Release()
	})
}

func TestGetContextCancel(t *testing.T) {
	p, m := newPool(t, pool.Config{Size: 4096, Count: 1})
	held := tryGet(t, p, 1)

	ctx, cancel := context.WithCancel(context.Background())
	ch := getAsync(p, ctx, 1)
	waitForWaiters(t, p, 1)
	start := time.Now()
	cancel()
	r := receive(t, ch)
	assert.ErrorIs(t, r.err, context.Canceled)
	assert.False(t, r.b.Valid())
	assert.Less(t, time.Since(start), time.Second, "promptly")
	assert.Equal(t, 0, p.Stats().Waiters, "left the queue")

	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer tcancel()
	_, err := p.Get(tctx, 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, 0, p.Stats().Waiters)

	_, err = p.Get(ctx, 1) // already canceled, nothing free
	assert.ErrorIs(t, err, context.Canceled)

	// Nothing leaked: the release finds no phantom waiter and the buffer
	// is free again.
	held.Release()
	s := tierStats(p, 4096)
	assert.Equal(t, 1, s.Free)
	assert.Equal(t, 0, s.InUse)
	assert.Equal(t, 1, m.Stats().Registrations)
	b := tryGet(t, p, 1)
	b.Release()
}

func TestCloseWakesWaiters(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 4096, Count: 1})
	held := tryGet(t, p, 1)
	ch := getAsync(p, context.Background(), 1)
	waitForWaiters(t, p, 1)
	require.NoError(t, p.Close())
	r := receive(t, ch)
	assert.ErrorIs(t, r.err, netio.ErrClosed)
	assert.False(t, r.b.Valid())
	held.Release()
}

func TestGetOrExtend(t *testing.T) {
	p, m := newPool(t, pool.Config{Size: 4096, Count: 1})
	a := tryGet(t, p, 1)
	b, err := p.GetOrExtend(100)
	require.NoError(t, err)
	assert.Equal(t, 4096, b.Size(), "grows the smallest fitting tier")
	assert.NotEqual(t, a.Addr(), b.Addr())
	assert.Equal(t, 2, m.Stats().Registrations)
	s := tierStats(p, 4096)
	assert.Equal(t, 2, s.Count)
	assert.Equal(t, 1, s.Base)
	b.Release()
	c, err := p.GetOrExtend(100)
	require.NoError(t, err)
	assert.Equal(t, b.Addr(), c.Addr(), "a free buffer is used before growing")
	assert.Equal(t, 2, m.Stats().Registrations)

	// No tier fits: a new tier of exactly the size asked for.
	d, err := p.GetOrExtend(10000)
	require.NoError(t, err)
	assert.Equal(t, 10000, d.Size())
	assert.Len(t, d.Bytes(), 10000)
	assert.Equal(t, 10000, p.MaxBufferSize())
	require.Len(t, p.Stats().Tiers, 2)
	d.Bytes()[9999] = 1
	d.Release()
	// Reused afterwards, by GetOrExtend, TryGet and Get.
	e, err := p.GetOrExtend(9000)
	require.NoError(t, err)
	assert.Equal(t, d.Addr(), e.Addr(), "the new tier is reused")
	e.Release()
	f := tryGet(t, p, 5000)
	assert.Equal(t, 10000, f.Size())
	f.Release()
	g, err := p.Get(context.Background(), 10000)
	require.NoError(t, err)
	g.Release()
	assert.Equal(t, 3, m.Stats().Registrations)
	assert.Len(t, p.Stats().Tiers, 2)
	st := p.Stats()
	assert.Equal(t, int64(2*4096+10000), st.RegisteredBytes)
	assert.Equal(t, int64(2*4096+10000), st.PeakBytes)

	_, err = p.GetOrExtend(-1)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = p.GetOrExtend(netio.MaxBufferSize + 1)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	a.Release()
	c.Release()
}

func TestGetOrExtendEmptyPool(t *testing.T) {
	p, m := newPool(t, pool.Config{Size: 2048})
	assert.Equal(t, 0, m.Stats().Registrations, "starts empty")
	_, st := p.TryGet(1)
	assert.Equal(t, netio.NoResources, st)
	b, err := p.GetOrExtend(1)
	require.NoError(t, err)
	assert.Equal(t, 2048, b.Size())
	ch := getAsync(p, context.Background(), 1) // waits for the grown buffer
	waitForWaiters(t, p, 1)
	b.Release()
	r := receive(t, ch)
	require.NoError(t, r.err)
	assert.Equal(t, b.Addr(), r.b.Addr())
	r.b.Release()
}

func TestBudgetRefusalChangesNothing(t *testing.T) {
	p, m := newPool(t, pool.Config{Size: 4096, Count: 1, Budget: 2 * 4096})
	a := tryGet(t, p, 1)
	b, err := p.GetOrExtend(1)
	require.NoError(t, err, "within the budget")
	before, mBefore := p.Stats(), m.Stats()

	_, err = p.GetOrExtend(1)
	assert.ErrorIs(t, err, netio.ErrNoResources, "growing the tier passes the budget")
	_, err = p.GetOrExtend(5000)
	assert.ErrorIs(t, err, netio.ErrNoResources, "a new tier passes the budget")
	after, mAfter := p.Stats(), m.Stats()
	assert.Equal(t, before.Tiers, after.Tiers, "no tier added or grown")
	assert.Equal(t, before.RegisteredBytes, after.RegisteredBytes)
	assert.Equal(t, before.MappedBytes, after.MappedBytes)
	assert.Equal(t, mBefore.Registrations, mAfter.Registrations)
	assert.Equal(t, 4096, p.MaxBufferSize())

	b.Release()
	c, err := p.GetOrExtend(1)
	require.NoError(t, err, "a free buffer needs no budget")
	c.Release()
	a.Release()
}

func TestDomainLimitRefusal(t *testing.T) {
	m := newMgr(t, domain.Config{MaxRegistrations: 2})
	p, err := pool.New(m, pool.Config{Size: 4096, Count: 1})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	a := tryGet(t, p, 1)
	b, err := p.GetOrExtend(1)
	require.NoError(t, err)
	before := p.Stats()
	_, err = p.GetOrExtend(1)
	assert.ErrorIs(t, err, netio.ErrNoResources, "domain registration limit")
	_, err = p.GetOrExtend(8192)
	assert.ErrorIs(t, err, netio.ErrNoResources)
	after := p.Stats()
	assert.Equal(t, before.Tiers, after.Tiers)
	assert.Equal(t, before.MappedBytes, after.MappedBytes, "memory of the refused buffer unmapped")
	assert.Equal(t, 2, m.Stats().Registrations)
	a.Release()
	b.Release()
}

func TestShrinkAfterIdle(t *testing.T) {
	const idle = 50 * time.Millisecond
	p, m := newPool(t, pool.Config{Size: 4096, Count: 1, IdleTimeout: idle})
	base := tryGet(t, p, 1)
	e1, err := p.GetOrExtend(1)
	require.NoError(t, err)
	e2, err := p.GetOrExtend(1)
	require.NoError(t, err)
	require.Equal(t, 3, m.Stats().Registrations)

	e1.Release()
	base.Release()
	released := time.Now()
	assert.Equal(t, 3, tierStats(p, 4096).Count, "not shrunk at once")
	require.Eventually(t, func() bool {
		return tierStats(p, 4096).Count == 2 && m.Stats().Registrations == 2 &&
			p.Stats().RegisteredBytes == 2*4096
	},
		2*time.Second, 2*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(released), idle, "shrunk only after IdleTimeout")
	assert.Equal(t, 2, m.Stats().Registrations, "the idle extra buffer is deregistered")
	assert.Equal(t, int64(2*4096), p.Stats().RegisteredBytes)

	// A leased extra buffer is not shrunk, and stays usable.
	time.Sleep(2 * idle)
	assert.Equal(t, 2, tierStats(p, 4096).Count)
	e2.Bytes()[4095] = 7
	e2.Release()
	require.Eventually(t, func() bool { return tierStats(p, 4096).Count == 1 && m.Stats().Registrations == 1 },
		2*time.Second, 2*time.Millisecond)

	// A tier GetOrExtend added shrinks to nothing but stays for reuse.
	n, err := p.GetOrExtend(10000)
	require.NoError(t, err)
	n.Release()
	require.Eventually(t, func() bool {
		return tierStats(p, 10000).Count == 0 && m.Stats().Registrations == 1 &&
			p.Stats().RegisteredBytes == 4096
	},
		2*time.Second, 2*time.Millisecond)
	assert.Equal(t, 10000, p.MaxBufferSize())
	assert.Equal(t, 1, m.Stats().Registrations)
	assert.Equal(t, int64(4096), p.Stats().RegisteredBytes)

	// Configured buffers are never shrunk.
	time.Sleep(2 * idle)
	s := tierStats(p, 4096)
	assert.Equal(t, 1, s.Count)
	assert.Equal(t, 1, s.Free)
	assert.Equal(t, int64(4096+10000), p.Stats().PeakBytes, "high-water mark kept")
}

func TestLeaseOutlivesClose(t *testing.T) {
	m := newMgr(t, domain.Config{})
	p, err := pool.New(m, threeTiers)
	require.NoError(t, err)
	a := tryGet(t, p, 1)
	e, err := p.GetOrExtend(20000)
	require.NoError(t, err)
	r := a.Ref()
	require.Equal(t, 7, m.Stats().Registrations)

	require.NoError(t, p.Close())
	assert.Equal(t, 2, m.Stats().Registrations, "free buffers freed at once, leased ones kept")
	_, st := p.TryGet(1)
	assert.Equal(t, netio.Closed, st)
	_, err = p.Get(context.Background(), 1)
	assert.ErrorIs(t, err, netio.ErrClosed)
	_, err = p.GetOrExtend(1)
	assert.ErrorIs(t, err, netio.ErrClosed)
	assert.NoError(t, p.Close(), "idempotent")

	for i := range a.Bytes() { // still mapped and writable
		a.Bytes()[i] = byte(i)
	}
	for i := range e.Bytes() {
		e.Bytes()[i] = byte(i)
	}
	a.Release()
	assert.Equal(t, 2, m.Stats().Registrations, "a reference remains")
	r.Bytes()[0] = 1
	r.Release()
	assert.Equal(t, 1, m.Stats().Registrations)
	e.Release()
	assert.Equal(t, 0, m.Stats().Registrations)
	assert.Equal(t, int64(0), p.Stats().RegisteredBytes)
	assert.Equal(t, int64(0), p.Stats().MappedBytes, "every mapping unmapped")
}

func TestDoubleReleaseIsNoOp(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 2})
	a := tryGet(t, p, 1)
	a.Release()
	a.Release()
	s := tierStats(p, 256)
	assert.Equal(t, 2, s.Free, "counted once")
	assert.Equal(t, 0, s.InUse)
	x, y := tryGet(t, p, 1), tryGet(t, p, 1)
	assert.NotEqual(t, x.Addr(), y.Addr(), "never the same buffer twice")
	_, st := p.TryGet(1)
	assert.Equal(t, netio.NoResources, st, "no phantom third buffer")
	x.Release()
	y.Release()
	var zero pool.Buffer
	assert.False(t, zero.Valid())
	assert.NotPanics(t, zero.Release)
	assert.Equal(t, 0, zero.UseCount())
	assert.False(t, zero.Ref().Valid())
}

func TestRefUseCount(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 1})
	a := tryGet(t, p, 1)
	assert.Equal(t, 1, a.UseCount())
	r := a.Ref()
	require.True(t, r.Valid())
	assert.Equal(t, 2, a.UseCount())
	assert.Equal(t, 2, r.UseCount())
	assert.Equal(t, a.Addr(), r.Addr())
	assert.Equal(t, a.Key(), r.Key())
	r2 := r.Ref()
	assert.Equal(t, 3, a.UseCount())

	a.Release()
	a.Release() // no-op per handle
	assert.Equal(t, 2, r.UseCount())
	assert.Equal(t, 0, tierStats(p, 256).Free, "still leased")
	assert.False(t, a.Ref().Valid(), "no Ref from a released handle")
	r.Release()
	r.Release()
	assert.Equal(t, 1, r2.UseCount())
	assert.Equal(t, 0, tierStats(p, 256).Free)
	r2.Release()
	assert.Equal(t, 1, tierStats(p, 256).Free, "back with the last handle")
}

func TestConcurrentBorrowers(t *testing.T) {
	const workers, ops = 8, 1500
	m := newMgr(t, domain.Config{})
	p, err := pool.New(m, pool.Config{NumTiers: 3, PerTier: 3, FirstSize: 512, SizeMultiple: 2,
		Budget: 256 << 10, IdleTimeout: 5 * time.Millisecond})
	require.NoError(t, err)
	extraSizes := []int{3000, 5000, 7000} // beyond the tiers: GetOrExtend adds them
	for _, size := range extraSizes {     // smallest first, so each gets its tier
		b, err := p.GetOrExtend(size)
		require.NoError(t, err)
		b.Release()
	}

	var collisions, fails atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			tag := byte(w + 1)
			for i := range ops {
				size := 1 + rng.IntN(2048)
				var b pool.Buffer
				switch rng.IntN(4) {
				case 0:
					var st netio.Status
					if b, st = p.TryGet(size); st != netio.OK && st != netio.NoResources {
						fails.Add(1)
					}
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3))*time.Millisecond)
					var err error
					if b, err = p.Get(ctx, size); err != nil && !errors.Is(err, context.DeadlineExceeded) {
						fails.Add(1)
					}
					cancel()
				case 2:
					if rng.IntN(4) == 0 {
						size = extraSizes[rng.IntN(len(extraSizes))]
					}
					var err error
					if b, err = p.GetOrExtend(size); err != nil && !errors.Is(err, netio.ErrNoResources) {
						fails.Add(1)
					}
				case 3:
					var err error
					if b, err = p.Get(context.Background(), size); err != nil {
						fails.Add(1)
					}
				}
				if !b.Valid() {
					continue
				}
				if b.Size() < size || b.UseCount() != 1 {
					fails.Add(1)
				}
				// Exclusive ownership: nobody else writes while we hold it.
				buf := b.Bytes()
				buf[0], buf[len(buf)-1] = tag, tag
				var r pool.Buffer
				if i%5 == 0 {
					r = b.Ref()
				}
				if i%16 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				if buf[0] != tag || buf[len(buf)-1] != tag {
					collisions.Add(1)
				}
				b.Release()
				if r.Valid() {
					// A second Release of a handle is a no-op; r keeps the
					// buffer leased, so b's handle cannot have been reused.
					b.Release()
					if r.UseCount() != 1 || r.Bytes()[0] != tag {
						collisions.Add(1)
					}
					r.Release()
					r.Release()
				}
			}
		})
	}
	wg.Wait()
	assert.Zero(t, collisions.Load(), "a buffer was leased twice")
	assert.Zero(t, fails.Load(), "unexpected results")

	st := p.Stats()
	assert.Equal(t, 0, st.Waiters)
	assert.LessOrEqual(t, st.PeakBytes, int64(256<<10), "budget held")
	for _, ts := range st.Tiers {
		assert.Equal(t, 0, ts.InUse, "tier %d", ts.Size)
		assert.Equal(t, ts.Count, ts.Free, "tier %d", ts.Size)
		assert.GreaterOrEqual(t, ts.Count, ts.Base)
	}
	// The shrinker runs on: every extra buffer goes, and then the domain's
	// registrations and the pool's bytes match the configured buffers.
	require.Eventually(t, func() bool {
		s := p.Stats()
		for _, ts := range s.Tiers {
			if ts.Count != ts.Base {
				return false
			}
		}
		return m.Stats().Registrations == 9 && s.RegisteredBytes == 3*(512+1024+2048)
	}, 2*time.Second, 2*time.Millisecond, "shrunk back to the configured buffers")
	assert.Equal(t, int64(3*(512+1024+2048)), p.Stats().RegisteredBytes)
	assert.Len(t, p.Stats().Tiers, 3+len(extraSizes), "each extra size has its tier, reused by the workers")
	require.NoError(t, p.Close())
}

func TestHugePageAllocator(t *testing.T) {
	var logBuf bytes.Buffer
	alloc := &pool.HugePageAllocator{}
	p, m := newPool(t, pool.Config{Size: 64 << 10, Count: 2, Allocator: alloc,
		Logger: zerolog.New(&logBuf)})
	b := tryGet(t, p, 1)
	for i := range b.Bytes() {
		b.Bytes()[i] = byte(i)
	}
	e, err := p.GetOrExtend(100 << 10)
	require.NoError(t, err)
	e.Bytes()[len(e.Bytes())-1] = 1
	assert.Equal(t, 3, m.Stats().Registrations)
	huge, fallback := alloc.Mappings()
	assert.Equal(t, int64(2), huge+fallback, "both mappings went through the allocator")
	if fallback > 0 {
		assert.Contains(t, logBuf.String(), "MADV_HUGEPAGE", "the fallback is logged")
		assert.Equal(t, 1, bytes.Count(logBuf.Bytes(), []byte("MADV_HUGEPAGE")), "once")
	}
	t.Logf("hugetlb mappings %d, fallback mappings %d", huge, fallback)
	b.Release()
	e.Release()
}

// Whatever the allocator falls back to, Free must unmap it in a way that
// leaves domain.MappedBytes (the leak check) where it was.
func TestHugePageAllocatorKeepsMappedBytes(t *testing.T) {
	alloc := &pool.HugePageAllocator{}
	before := domain.MappedBytes()
	mem, err := alloc.Alloc(100 << 10)
	require.NoError(t, err)
	mem[len(mem)-1] = 1
	require.NoError(t, alloc.Free(mem))
	assert.Equal(t, before, domain.MappedBytes())
}

// A stale copy of a handle, released after its buffer was leased again,
// must not release the new lease. With a handle reused for every lease
// this released b2.
func TestStaleHandleDoesNotReleaseNextLease(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 1})
	b := tryGet(t, p, 1)
	stale := b
	b.Release()
	b2 := tryGet(t, p, 1) // the only buffer: the same one, leased again
	require.Equal(t, b.Addr(), b2.Addr())

	stale.Release()
	b.Release()
	assert.Equal(t, 1, b2.UseCount(), "b2 is still leased")
	_, st := p.TryGet(1)
	assert.Equal(t, netio.NoResources, st, "the buffer was not given back")
	assert.Equal(t, 1, tierStats(p, 256).InUse)
	assert.Equal(t, 0, stale.UseCount(), "a stale handle sees no lease")
	assert.False(t, stale.Ref().Valid(), "no Ref into another lease")
	assert.Equal(t, 1, b2.UseCount())
	assert.True(t, stale.Valid(), "still a handle, just a dead one")

	b2.Release()
	s := tierStats(p, 256)
	assert.Equal(t, 1, s.Free, "b2's release returns it")
	assert.Equal(t, 0, s.InUse)
	b2.Release()
	stale.Release()
	assert.Equal(t, 1, tierStats(p, 256).Free, "counted once")
	b3 := tryGet(t, p, 1)
	_, st = p.TryGet(1)
	assert.Equal(t, netio.NoResources, st, "no phantom second buffer")
	b3.Release()
}

// The defer pattern: a deferred Release after an explicit one, running
// while another borrower (here a waiting Get) holds the buffer.
func TestDeferredReleaseAfterHandoff(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 1})
	var r result
	func() {
		b := tryGet(t, p, 1)
		defer b.Release()
		ch := getAsync(p, context.Background(), 1)
		waitForWaiters(t, p, 1)
		b.Release() // hands the buffer to the waiter
		r = receive(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, b.Addr(), r.b.Addr())
	}() // the deferred Release runs during the waiter's lease
	assert.Equal(t, 1, r.b.UseCount(), "the waiter's lease survives the deferred Release")
	_, st := p.TryGet(1)
	assert.Equal(t, netio.NoResources, st)
	r.b.Release()
	assert.Equal(t, 1, tierStats(p, 256).Free)
}

func TestRefHandlesReleasedTwice(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 1})
	a := tryGet(t, p, 1)
	r := a.Ref()
	require.True(t, r.Valid())
	r.Release()
	r.Release()
	assert.Equal(t, 1, a.UseCount(), "one release counted")

	// A new Ref after r's release does not take r's identity: r's
	// second release cannot drop it.
	r2 := a.Ref()
	require.True(t, r2.Valid())
	r.Release()
	assert.Equal(t, 2, a.UseCount())
	a.Release()
	a.Release()
	assert.Equal(t, 1, r2.UseCount())
	assert.Equal(t, 0, tierStats(p, 256).Free, "r2 holds it")

	// A Ref kept from this lease is stale in the next one.
	r3 := r2.Ref()
	r2.Release()
	r3.Release()
	assert.Equal(t, 1, tierStats(p, 256).Free)
	b := tryGet(t, p, 1)
	for _, h := range []pool.Buffer{a, r, r2, r3} {
		h.Release()
		assert.False(t, h.Ref().Valid())
	}
	assert.Equal(t, 1, b.UseCount(), "stale Refs leave the new lease alone")
	b.Release()
	assert.Equal(t, 1, tierStats(p, 256).Free)
}

func TestRefLimit(t *testing.T) {
	p, _ := newPool(t, pool.Config{Size: 256, Count: 1})
	a := tryGet(t, p, 1)
	hs := []pool.Buffer{a}
	for i := range 31 {
		r := hs[i].Ref()
		require.True(t, r.Valid(), "Ref %d", i+1)
		hs = append(hs, r)
	}
	assert.Equal(t, 32, a.UseCount())
	for _, h := range hs {
		assert.False(t, h.Ref().Valid(), "the 33rd handle is refused")
	}
	assert.Equal(t, 32, a.UseCount(), "a refused Ref counts nothing")

	// A released handle makes room again.
	hs[5].Release()
	r := a.Ref()
	require.True(t, r.Valid())
	assert.Equal(t, 32, a.UseCount())
	hs[5] = r
	for _, h := range hs {
		h.Release()
		h.Release()
	}
	s := tierStats(p, 256)
	assert.Equal(t, 1, s.Free)
	assert.Equal(t, 0, s.InUse)
}

// Borrowers release their handles twice, from copies, concurrently with
// each other, and keep stale copies that other goroutines release at random
// later, while the buffers are leased by somebody else. No lease may be cut
// short: every borrower keeps its buffer to itself until it releases it.
func TestConcurrentStaleAndDoubleReleases(t *testing.T) {
	const workers, ops = 6, 2000
	p, _ := newPool(t, pool.Config{NumTiers: 2, PerTier: 2, FirstSize: 256, SizeMultiple: 2})

	var mu sync.Mutex
	var graveyard []pool.Buffer // released handles, fair game for anyone
	bury := func(b pool.Buffer) {
		mu.Lock()
		graveyard = append(graveyard, b)
		if len(graveyard) > 64 {
			graveyard = graveyard[len(graveyard)-64:]
		}
		mu.Unlock()
	}
	dig := func(rng *rand.Rand) pool.Buffer {
		mu.Lock()
		defer mu.Unlock()
		if len(graveyard) == 0 {
			return pool.Buffer{}
		}
		return graveyard[rng.IntN(len(graveyard))]
	}

	var collisions, fails atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			tag := byte(w + 1)
			for i := range ops {
				b, err := p.Get(context.Background(), 1+rng.IntN(512))
				if err != nil {
					fails.Add(1)
					continue
				}
				if b.UseCount() != 1 {
					fails.Add(1)
				}
				buf := b.Bytes()
				buf[0], buf[len(buf)-1] = tag, tag
				// Stale handles of earlier leases, released now, while
				// this worker (or another) holds their buffer.
				for range 1 + rng.IntN(3) {
					dig(rng).Release()
				}
				var r pool.Buffer
				if i%3 == 0 {
					r = b.Ref()
				}
				if i%32 == 0 {
					time.Sleep(20 * time.Microsecond)
				}
				if buf[0] != tag || buf[len(buf)-1] != tag || b.UseCount() != 1+btoi(r.Valid()) {
					collisions.Add(1)
				}
				// Two releases of one handle at once, from copies.
				var rel sync.WaitGroup
				c := b
				rel.Go(c.Release)
				b.Release()
				rel.Wait()
				b.Release()
				if r.Valid() {
					if r.UseCount() != 1 || buf[0] != tag {
						collisions.Add(1)
					}
					r.Release()
					r.Release()
					bury(r)
				}
				bury(b)
			}
		})
	}
	wg.Wait()
	assert.Zero(t, collisions.Load(), "a lease was cut short or shared")
	assert.Zero(t, fails.Load(), "unexpected results")
	for _, h := range graveyard {
		h.Release()
	}
	for _, ts := range p.Stats().Tiers {
		assert.Equal(t, 2, ts.Free, "tier %d", ts.Size)
		assert.Equal(t, 0, ts.InUse, "tier %d", ts.Size)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestGetOrExtendN(t *testing.T) {
	p, m := newPool(t, pool.Config{Access: domain.AccessRecv, Size: 1024, Count: 2, Budget: 4 * 1024})
	assert.Equal(t, domain.AccessRecv, p.Access())
	assert.Same(t, m, p.Domain())

	prefix := []pool.Buffer{{}}
	got, err := p.GetOrExtendN(prefix, 1000, 3)
	require.NoError(t, err)
	require.Len(t, got, 4, "appended to dst")
	assert.False(t, got[0].Valid(), "dst's own elements kept")
	for _, b := range got[1:] {
		assert.Equal(t, 1024, b.Size())
	}
	assert.Equal(t, 3, tierStats(p, 1024).InUse, "two free buffers and one grown")

	more, err := p.GetOrExtendN([]pool.Buffer{{}}, 1024, 2)
	assert.ErrorIs(t, err, netio.ErrNoResources, "the budget has room for one more, not two")
	assert.Len(t, more, 1, "dst as it was")
	assert.Equal(t, 3, tierStats(p, 1024).InUse, "all or none: the one leased went back")
	assert.Equal(t, int64(4*1024), p.Stats().RegisteredBytes, "it stays registered, within the budget")

	_, err = p.GetOrExtendN(nil, 1024, -1)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	none, err := p.GetOrExtendN(nil, 1024, 0)
	assert.NoError(t, err)
	assert.Empty(t, none)
	for _, b := range got[1:] {
		b.Release()
	}
	assert.Zero(t, tierStats(p, 1024).InUse)
}

func TestStatsInUse(t *testing.T) {
	p, _ := newPool(t, threeTiers)
	a, b := tryGet(t, p, 1024), tryGet(t, p, 16<<10)
	assert.Equal(t, 2, p.Stats().InUse(), "leases of different tiers add up")
	a.Release()
	assert.Equal(t, 1, p.Stats().InUse())
	b.Release()
	assert.Zero(t, p.Stats().InUse())
}
