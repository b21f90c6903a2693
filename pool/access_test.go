package pool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
)

// TestPoolAccess: a pool registers every buffer, configured or grown, with
// its Access and nothing more; by default that is send only, so a receive
// or RMA pool must ask for what it needs.
func TestPoolAccess(t *testing.T) {
	for name, tc := range map[string]struct {
		access, want domain.Access
	}{
		"default":      {0, domain.AccessSend},
		"receive":      {domain.AccessRecv, domain.AccessRecv},
		"RMA target":   {domain.AccessRemoteRead, domain.AccessRemoteRead},
		"local RMA":    {domain.AccessRead | domain.AccessWrite, domain.AccessRead | domain.AccessWrite},
		"send and rcv": {domain.AccessSend | domain.AccessRecv, domain.AccessSend | domain.AccessRecv},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := twoTiers
			cfg.Access = tc.access
			p, m := newPool(t, cfg)
			assert.Equal(t, tc.want, p.Access())
			small, large := tryGet(t, p, 1024), tryGet(t, p, 4096)
			grown, err := p.GetOrExtend(1024) // every buffer is leased: grow a tier
			require.NoError(t, err)
			tier, err := p.GetOrExtend(1 << 20) // no tier fits: add one
			require.NoError(t, err)
			for _, b := range []pool.Buffer{small, large, grown, tier} {
				assert.Equal(t, tc.want, b.Registration().Access())
				b.Release()
			}
			regs := m.Registrations()
			assert.Len(t, regs, 4, "two configured, one grown, one in a new tier")
			for _, r := range regs {
				assert.Equal(t, tc.want, r.Access, "registration at %#x", r.Addr)
			}
		})
	}
}
