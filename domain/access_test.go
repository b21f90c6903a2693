package domain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

// TestAccessIsWhatWasAsked: Registrations reports every live registration
// with exactly the access it was made with, and a registration cache asks
// for send access only unless told otherwise.
func TestAccessIsWhatWasAsked(t *testing.T) {
	base := rcMemory(t, 4)
	m := open(t, domain.Config{})
	defer func() { assert.NoError(t, m.Close()) }()
	recv, err := m.AllocRegistered(4096, domain.AccessRecv)
	require.NoError(t, err)
	defer func() { assert.NoError(t, recv.Close()) }()
	exposed, err := m.Register(base+3*page, int(page), domain.AccessRemoteRead|domain.AccessRemoteWrite)
	require.NoError(t, err)
	defer func() { assert.NoError(t, exposed.Close()) }()

	sendCache, err := m.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)
	readCache, err := m.NewRegistrationCache(domain.CacheConfig{Access: domain.AccessRead})
	require.NoError(t, err)
	s, err := sendCache.Acquire(base, int(page))
	require.NoError(t, err)
	r, err := readCache.Acquire(base+page, int(page))
	require.NoError(t, err)

	got := map[uintptr]domain.Access{}
	for _, ri := range m.Registrations() {
		got[ri.Addr] = ri.Access
	}
	assert.Equal(t, map[uintptr]domain.Access{
		recv.Addr():    domain.AccessRecv,
		base:           domain.AccessSend, // the cache's default: what zero-copy sends need, no more
		base + page:    domain.AccessRead,
		exposed.Addr(): domain.AccessRemoteRead | domain.AccessRemoteWrite,
	}, got)
	regs := m.Registrations()
	for i := 1; i < len(regs); i++ {
		assert.Less(t, regs[i-1].Addr, regs[i].Addr, "ordered by address")
	}

	sendCache.Release(s)
	readCache.Release(r)
	require.NoError(t, sendCache.Close())
	require.NoError(t, readCache.Close())
	assert.Len(t, m.Registrations(), 2, "closed caches deregistered theirs")
}
