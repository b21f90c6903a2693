package sendbuf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// TestSendBuffersAreSendOnly: the memory of every kind of send buffer pool
// is registered for sending and nothing else, so no peer can read or write
// it and no receive can land in it.
func TestSendBuffersAreSendOnly(t *testing.T) {
	m := openDomain(t, domain.Config{})
	defer func() { assert.NoError(t, m.Close()) }()
	own, err := sendbuf.NewPool(m, 100, 4)
	require.NoError(t, err)
	shared, err := sendbuf.NewSendBufferManager(m, netio.BufferedSendParams{BufferSize: 64, BufferCount: 2})
	require.NoError(t, err)
	src, err := pool.New(m, pool.Config{Size: 128}) // default access
	require.NoError(t, err)
	leased, err := sendbuf.NewPoolFrom(src, 100, 3)
	require.NoError(t, err)

	for name, p := range map[string]*sendbuf.Pool{"NewPool": own, "SendBufferManager": shared.Pool(), "NewPoolFrom": leased} {
		for id := range uint64(p.Len()) {
			addr := p.Lookup(id).Addr()
			assert.Equal(t, domain.AccessSend, accessAt(t, m, addr), "%s buffer %d", name, id)
		}
	}
	assert.Len(t, m.Registrations(), 1+1+3, "one region per own pool, one per leased buffer")
	for _, c := range []interface{ Close() error }{leased, src, shared, own} {
		require.NoError(t, c.Close())
	}
}

// accessAt returns the access of the registration of m that holds addr.
func accessAt(t *testing.T, m *domain.Manager, addr uintptr) domain.Access {
	t.Helper()
	for _, r := range m.Registrations() {
		if addr >= r.Addr && addr < r.Addr+uintptr(r.Len) {
			return r.Access
		}
	}
	t.Errorf("no registration holds %#x", addr)
	return 0
}
