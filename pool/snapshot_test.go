package pool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/stats"
)

// TestSnapshotTiers: a pool is in its manager's snapshot while open, with
// its tiers' buffers, free buffers and fewest free since the previous
// snapshot, which does not move Stats' own interval; Close takes it out.
func TestSnapshotTiers(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer mgr.Close()
	p, err := pool.New(mgr, pool.Config{Size: 4096, Count: 4})
	require.NoError(t, err)

	var held []pool.Buffer
	for range 3 {
		b, st := p.TryGet(4096)
		require.Equal(t, netio.OK, st)
		held = append(held, b)
	}
	held[0].Release()
	snap := mgr.Snapshot()
	require.Len(t, snap.Pools, 1)
	assert.Equal(t, []stats.Tier{{Size: 4096, Count: 4, Free: 2, MinFree: 1}}, snap.Pools[0].Tiers)
	assert.Equal(t, int64(4*4096), snap.Pools[0].RegisteredBytes)
	assert.Equal(t, 1, p.Stats().Tiers[0].MinFree, "the snapshot left Stats' interval alone")

	for _, b := range held[1:] {
		b.Release()
	}
	assert.Equal(t, []stats.Tier{{Size: 4096, Count: 4, Free: 4, MinFree: 2}}, mgr.Snapshot().Pools[0].Tiers)
	assert.Equal(t, 4, mgr.Snapshot().Pools[0].Tiers[0].MinFree, "a new interval")

	require.NoError(t, p.Close())
	assert.Empty(t, mgr.Snapshot().Pools)
}
