package pool_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
)

// TestBadInputNewInClosedDomain: a closed domain refuses a pool that
// registers buffers up front, and nothing stays mapped.
func TestBadInputNewInClosedDomain(t *testing.T) {
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	mapped := domain.MappedBytes()
	for name, cfg := range map[string]pool.Config{
		"single tier": {Size: 4096, Count: 2},
		"multi-tier":  {NumTiers: 2, PerTier: 1, FirstSize: 64, SizeMultiple: 4},
	} {
		p, err := pool.New(m, cfg)
		assert.ErrorIs(t, err, netio.ErrClosed, name)
		assert.Nil(t, p, name)
		assert.Equal(t, mapped, domain.MappedBytes(), "%s: the memory was given back", name)
	}
}

// TestBadInputLeases: sizes no tier holds, negative sizes and counts, a
// canceled wait and the zero Buffer are refused or ignored, and the pool's
// tiers, bytes and waiters are as they were.
func TestBadInputLeases(t *testing.T) {
	p, m := newPool(t, twoTiers)
	held := tryGet(t, p, 4096) // the only 4 KiB buffer: the tier is empty
	p.Stats()                  // start a MinFree interval
	before, regs := p.Stats(), m.Stats().Registrations
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context

	for size, want := range map[int]netio.Status{
		-1:                 netio.InvalidArgument,
		-1 << 40:           netio.InvalidArgument,
		4097:               netio.InvalidArgument, // larger than every tier
		int(^uint(0) >> 1): netio.InvalidArgument,
		2048:               netio.NoResources, // fits the empty 4 KiB tier only
	} {
		b, st := p.TryGet(size)
		assert.Equal(t, want, st, "TryGet(%d)", size)
		assert.False(t, b.Valid(), "TryGet(%d)", size)
	}
	errs := map[string]struct {
		call func() error
		want error
	}{
		"Get(-1)":                 {func() error { _, err := p.Get(context.Background(), -1); return err }, netio.ErrInvalidArgument},
		"Get(larger)":             {func() error { _, err := p.Get(context.Background(), 4097); return err }, netio.ErrInvalidArgument},
		"Get canceled":            {func() error { _, err := p.Get(canceled, 2048); return err }, context.Canceled},
		"Get nil ctx, would wait": {func() error { _, err := p.Get(nilCtx, 2048); return err }, netio.ErrInvalidArgument},
		"Get nil ctx, one free":   {func() error { _, err := p.Get(nilCtx, 64); return err }, netio.ErrInvalidArgument},
		"GetOrExtend(-1)":         {func() error { _, err := p.GetOrExtend(-1); return err }, netio.ErrInvalidArgument},
		"GetOrExtend(too large)":  {func() error { _, err := p.GetOrExtend(netio.MaxBufferSize + 1); return err }, netio.ErrInvalidArgument},
		"GetOrExtendN(n -1)": {func() error {
			dst, err := p.GetOrExtendN([]pool.Buffer{held}, 64, -1)
			assert.Equal(t, []pool.Buffer{held}, dst, "dst unchanged")
			return err
		}, netio.ErrInvalidArgument},
		"GetOrExtendN(size -1)": {func() error {
			dst, err := p.GetOrExtendN(nil, -1, 2)
			assert.Empty(t, dst)
			return err
		}, netio.ErrInvalidArgument},
	}
	for name, tc := range errs {
		var err error
		require.NotPanics(t, func() { err = tc.call() }, name)
		assert.ErrorIs(t, err, tc.want, name)
	}
	var zero pool.Buffer
	assert.NotPanics(t, func() {
		zero.Release()
		assert.False(t, zero.Ref().Valid())
		assert.Zero(t, zero.UseCount())
		assert.False(t, zero.Valid())
	})
	assert.Equal(t, before, p.Stats(), "refused calls change nothing")
	assert.Equal(t, regs, m.Stats().Registrations)
	held.Release()
}

// TestBadInputClosedPool: after Close every way to lease is refused with
// Closed, releasing a lease taken before still works once, and Close stays
// idempotent.
func TestBadInputClosedPool(t *testing.T) {
	m := newMgr(t, domain.Config{})
	p, err := pool.New(m, pool.Config{Size: 64, Count: 2})
	require.NoError(t, err)
	kept := tryGet(t, p, 64)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "idempotent")
	assert.Equal(t, 1, m.Stats().Registrations, "the lease keeps its buffer")

	_, st := p.TryGet(64)
	assert.Equal(t, netio.Closed, st)
	_, st = p.TryGet(-1)
	assert.Equal(t, netio.Closed, st, "closed wins over a bad size")
	_, err = p.Get(context.Background(), 64)
	assert.ErrorIs(t, err, netio.ErrClosed)
	_, err = p.GetOrExtend(64)
	assert.ErrorIs(t, err, netio.ErrClosed)
	_, err = p.GetOrExtend(1 << 20)
	assert.ErrorIs(t, err, netio.ErrClosed, "no tier is added to a closed pool")
	dst, err := p.GetOrExtendN(nil, 64, 1)
	assert.ErrorIs(t, err, netio.ErrClosed)
	assert.Empty(t, dst)
	assert.Len(t, p.Stats().Tiers, 1)

	kept.Release()
	kept.Release()
	assert.Zero(t, m.Stats().Registrations, "freed at its last release, once")
	assert.True(t, p.Stats().Closed)
}

// TestBadInputUnknownAccess: access bits no registration knows are a
// configuration error from New, whether or not it registers anything up
// front, and nothing is registered or mapped.
func TestBadInputUnknownAccess(t *testing.T) {
	m := newMgr(t, domain.Config{})
	mapped := domain.MappedBytes()
	for name, cfg := range map[string]pool.Config{
		"unknown bit, buffers up front": {Size: 64, Count: 2, Access: domain.AccessSend | 1<<62},
		"unknown bit, empty pool":       {Size: 64, Access: domain.AccessRecv | 1<<62},
		"every bit, multi-tier":         {NumTiers: 2, PerTier: 1, FirstSize: 64, SizeMultiple: 4, Access: ^domain.Access(0)},
	} {
		p, err := pool.New(m, cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, p, name)
		assert.Zero(t, m.Stats().Registrations, name)
		assert.Equal(t, mapped, domain.MappedBytes(), name)
		if p != nil {
			assert.NoError(t, p.Close())
		}
	}
}
