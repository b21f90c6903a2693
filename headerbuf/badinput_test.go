package headerbuf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/headerbuf"
)

// TestBadInputNewInDomain: a domain that is closed or at its registration
// limit refuses New with the matching sentinel, and New registers nothing.
func TestBadInputNewInDomain(t *testing.T) {
	closed, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, closed.Close())

	full, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1", MaxRegistrations: 1})
	require.NoError(t, err)
	held, err := full.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, held.Close())
		assert.NoError(t, full.Close())
	}()

	for name, tc := range map[string]struct {
		m    *domain.Manager
		want error
	}{
		"closed domain":    {closed, netio.ErrClosed},
		"domain limit hit": {full, netio.ErrNoResources},
	} {
		before := tc.m.Stats().Registrations
		h, err := headerbuf.New(tc.m, 64, 4)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, h, name)
		assert.Equal(t, before, tc.m.Stats().Registrations, "%s: nothing registered", name)
	}
}

// TestBadInputAfterClose: every method of a closed HeaderBuffer answers
// without touching the unmapped region: GetHeader is Closed whatever the
// data (an oversize header is InvalidArgument, as before Close), ReturnHeader is
// InvalidArgument for any index, and the description stays readable.
func TestBadInputAfterClose(t *testing.T) {
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, m.Close()) }()
	h, err := headerbuf.New(m, 32, 3)
	require.NoError(t, err)
	desc, region := h.Desc(), h.Region()
	require.NoError(t, h.Close())
	require.Zero(t, m.Stats().Registrations)

	for name, tc := range map[string]struct {
		data []byte
		want netio.Status
	}{
		"empty":    {nil, netio.Closed},
		"fits":     {make([]byte, 32), netio.Closed},
		"oversize": {make([]byte, 33), netio.InvalidArgument},
	} {
		r := h.GetHeader(tc.data, 1)
		assert.Equal(t, tc.want, r.Status, name)
		assert.Nil(t, r.Header, name)
		assert.Zero(t, r.Addr, name)
	}
	for _, idx := range []uint32{0, 2, 3, ^uint32(0)} {
		key, st := h.ReturnHeader(idx)
		assert.Equal(t, netio.InvalidArgument, st, "slot %d", idx)
		assert.Zero(t, key)
	}
	assert.Equal(t, 3, h.NumAvailable())
	assert.Empty(t, h.PendingSends())
	assert.Equal(t, []any{desc, region, 32, 3, 3 * 64, m}, []any{h.Desc(), h.Region(), h.SlotSize(), h.SlotCount(), h.RegionSize(), h.Domain()})
	assert.NoError(t, h.Close(), "idempotent")
	assert.Zero(t, m.Stats().Registrations)
}
