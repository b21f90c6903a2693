package domain_test

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

func open(t *testing.T, cfg domain.Config) *domain.Manager {
	t.Helper()
	if cfg.Provider == "" {
		cfg.Provider = "tcp"
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1"
	}
	m, err := domain.Open(cfg)
	require.NoError(t, err)
	return m
}

func TestOpenRejectsBadConfig(t *testing.T) {
	_, err := domain.Open(domain.Config{Address: "127.0.0.1"})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = domain.Open(domain.Config{Provider: "tcp"})
	assert.ErrorIs(t, err, netio.ErrBadAddress)
	_, err = domain.Open(domain.Config{Provider: "tcp", Address: "not-an-ip"})
	assert.ErrorIs(t, err, netio.ErrBadAddress)
	_, err = domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1", MaxRegistrations: -1})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = domain.Open(domain.Config{Provider: "no-such-provider", Address: "127.0.0.1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-such-provider")
}

func TestProviderLimitIsTheDefault(t *testing.T) {
	m := open(t, domain.Config{Provider: "sockets"})
	defer m.Close()
	assert.Equal(t, m.Info().MRCount(), m.Stats().MaxRegistrations)
	assert.Positive(t, m.Stats().MaxRegistrations, "sockets reports mr_cnt")
	assert.Equal(t, "sockets", m.Provider())
	assert.Equal(t, "127.0.0.1", m.Address())
}

func TestAccountingAndLimits(t *testing.T) {
	m := open(t, domain.Config{MaxRegistrations: 2, MaxRegisteredBytes: 3 << 20})
	a, err := m.AllocRegistered(1<<20, domain.AccessSend)
	require.NoError(t, err)
	assert.Len(t, a.Bytes(), 1<<20)
	assert.Zero(t, a.Addr()%uintptr(unix.Getpagesize()), "page-aligned")
	assert.NotZero(t, a.Key())
	b, err := m.AllocRegistered(1<<20, domain.AccessRecv)
	require.NoError(t, err)
	assert.Equal(t, domain.AccessRecv, b.Access())

	_, err = m.AllocRegistered(4096, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrNoResources, "count limit")
	st := m.Stats()
	assert.Equal(t, 2, st.Registrations, "a refused registration changes nothing")
	assert.Equal(t, int64(2<<20), st.RegisteredBytes)
	assert.Equal(t, int64(1), st.Refused)

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	_, err = m.AllocRegistered(2<<20+1, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrNoResources, "byte limit: 1 MiB + 2 MiB + 1 > 3 MiB")

	st = m.Stats()
	assert.Equal(t, 1, st.Registrations)
	assert.Equal(t, 2, st.PeakRegistrations)
	assert.Equal(t, int64(2<<20), st.PeakBytes)
	require.NoError(t, b.Close())
	assert.Zero(t, m.Stats().Registrations)
	assert.NoError(t, m.Close())
	assert.NoError(t, m.Close(), "Close is idempotent")
}

func TestRegisterCallerMemory(t *testing.T) {
	m := open(t, domain.Config{})
	defer m.Close()
	mem, err := domain.Alloc(10000)
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(mem)) }()
	r, err := m.Register(uintptr(unsafe.Pointer(&mem[0])), len(mem), domain.AccessSend)
	require.NoError(t, err)
	assert.Nil(t, r.Bytes(), "the caller owns the memory")
	assert.Equal(t, 10000, r.Len())
	require.NoError(t, r.Close())
	mem[0] = 1 // still mapped: Close did not unmap caller memory

	_, err = m.Register(0, 10, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = m.Register(uintptr(unsafe.Pointer(&mem[0])), 0, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = m.Register(uintptr(unsafe.Pointer(&mem[0])), 10, 0)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "no access flags")
	_, err = m.AllocRegistered(-1, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	assert.Zero(t, m.Stats().Registrations)
}

// Alloc's and AllocRegistered's pages are resident before anything
// touches them.
func TestAllocFaultsPagesIn(t *testing.T) {
	const pages = 64
	page := os.Getpagesize()
	mem, err := domain.Alloc(pages*page - 1)
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(mem)) }()
	assertResident(t, mem[:cap(mem)])

	m := open(t, domain.Config{})
	defer m.Close()
	r, err := m.AllocRegistered(pages*page, domain.AccessSend)
	require.NoError(t, err)
	defer func() { assert.NoError(t, r.Close()) }()
	assertResident(t, r.Bytes())
}

// assertResident checks with mincore that every page of mem is resident.
func assertResident(t *testing.T, mem []byte) {
	t.Helper()
	page := os.Getpagesize()
	vec := make([]byte, (len(mem)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, errno, "mincore")
	for i, v := range vec {
		assert.Equal(t, byte(1), v&1, "page %d not resident", i)
	}
}

func TestCloseRefusedWhileRegistrationsLive(t *testing.T) {
	m := open(t, domain.Config{})
	r, err := m.AllocRegistered(8192, domain.AccessSend)
	require.NoError(t, err)
	err = m.Close()
	assert.ErrorIs(t, err, domain.ErrRegistrationsAlive)
	assert.Contains(t, err.Error(), "1 registrations, 8192 bytes")
	assert.Equal(t, 1, m.Stats().Registrations, "a refused Close changes nothing")
	r.Bytes()[8191] = 1 // still mapped and usable

	mem, err := r.Detach()
	require.NoError(t, err)
	assert.Zero(t, m.Stats().Registrations, "Detach deregisters")
	mem[0] = 1 // but the memory stays mapped until Free
	require.NoError(t, domain.Free(mem))
	require.NoError(t, m.Close())
	_, err = m.AllocRegistered(8192, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrClosed)
}

// TestFailedCloseNeverLooksClosed: a Close that fails because the domain
// is still in use (a completion queue open on it) must never be seen as
// closed, not even for the moment it takes: a reconnecting sender that
// dials meanwhile and reads Closed, or gets ErrClosed from a registration,
// stops for good (endpoint TestFailedManagerCloseLeavesSendersRunning
// under load).
func TestFailedCloseNeverLooksClosed(t *testing.T) {
	m := open(t, domain.Config{})
	q, err := m.Domain().OpenCQ(16, false)
	require.NoError(t, err)
	stop := make(chan struct{})
	var sawClosed, refused atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if m.Closed() {
				sawClosed.Add(1)
			}
			r, err := m.AllocRegistered(4096, domain.AccessSend)
			if errors.Is(err, netio.ErrClosed) {
				refused.Add(1)
			} else if assert.NoError(t, err) {
				assert.NoError(t, r.Close())
			}
		}
	}()
	for range 10000 {
		if err := m.Close(); !assert.Error(t, err, "a completion queue is open") {
			break
		}
	}
	close(stop)
	<-done
	assert.Zero(t, sawClosed.Load(), "Closed reported true during a Close that failed")
	assert.Zero(t, refused.Load(), "registrations refused with ErrClosed during a Close that failed")
	require.NoError(t, q.Close())
	require.NoError(t, m.Close())
	assert.True(t, m.Closed())
}
