package domain_test

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
)

// unparsableAddresses are local addresses Open must refuse with
// netio.ErrBadAddress before asking libfabric.
var unparsableAddresses = []string{"", "nohostport", "1.2.3.4:99999", "[::1", "host:-1", "127.0.0.1:0", "localhost"}

func TestBadInputOpen(t *testing.T) {
	cases := map[string]struct {
		cfg  domain.Config
		want error
	}{
		"no provider":            {domain.Config{Address: "127.0.0.1"}, netio.ErrInvalidArgument},
		"negative registrations": {domain.Config{Provider: "tcp", Address: "127.0.0.1", MaxRegistrations: -1}, netio.ErrInvalidArgument},
		"negative bytes":         {domain.Config{Provider: "tcp", Address: "127.0.0.1", MaxRegisteredBytes: -1}, netio.ErrInvalidArgument},
		"unknown provider":       {domain.Config{Provider: "no-such-provider", Address: "127.0.0.1"}, fabric.ENODATA},
	}
	for _, addr := range unparsableAddresses {
		cases["address "+addr] = struct {
			cfg  domain.Config
			want error
		}{domain.Config{Provider: "tcp", Address: addr}, netio.ErrBadAddress}
	}
	for name, tc := range cases {
		m, err := domain.Open(tc.cfg)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, m, name)
	}
}

// TestBadInputRegister: refused registrations leave the accounting as it
// was. (PeakRegistrations and PeakBytes are left out: see the report on
// Register's order of checks.)
func TestBadInputRegister(t *testing.T) {
	m := open(t, domain.Config{MaxRegisteredBytes: 1 << 20})
	defer func() { assert.NoError(t, m.Close()) }()
	mem, err := domain.Alloc(8192)
	require.NoError(t, err)
	defer func() { assert.NoError(t, domain.Free(mem)) }()
	a := uintptr(unsafe.Pointer(&mem[0]))
	kept, err := m.Register(a, 4096, domain.AccessSend)
	require.NoError(t, err)
	defer func() { assert.NoError(t, kept.Close()) }()

	counts := func() [3]int64 {
		s := m.Stats()
		return [3]int64{int64(s.Registrations), s.RegisteredBytes, s.Refused}
	}
	before := counts()
	for name, tc := range map[string]struct {
		addr   uintptr
		n      int
		access domain.Access
		want   error
	}{
		"nil address":    {0, 64, domain.AccessSend, netio.ErrInvalidArgument},
		"zero length":    {a, 0, domain.AccessSend, netio.ErrInvalidArgument},
		"negative":       {a, -1, domain.AccessSend, netio.ErrInvalidArgument},
		"no access":      {a, 64, 0, netio.ErrInvalidArgument},
		"unknown access": {a, 64, domain.AccessSend | 1<<62, fabric.EINVAL},
		"wraps around":   {^uintptr(0) - 10, 100, domain.AccessSend, fabric.EINVAL},
	} {
		r, err := m.Register(tc.addr, tc.n, tc.access)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, r, name)
		assert.Equal(t, before, counts(), "%s: a refused registration changes nothing", name)
	}
	for _, size := range []int{0, -1, netio.MaxBufferSize*netio.MaxBufferCount + 1} {
		r, err := m.AllocRegistered(size, domain.AccessSend)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "AllocRegistered(%d)", size)
		assert.Nil(t, r)
	}
	assert.Equal(t, before, counts())

	// Past the byte limit: refused, counted as refused, nothing else.
	r, err := m.AllocRegistered(2<<20, domain.AccessSend)
	assert.ErrorIs(t, err, netio.ErrNoResources)
	assert.Nil(t, r)
	assert.Equal(t, before[2]+1, m.Stats().Refused)
	assert.Equal(t, []domain.RegistrationInfo{{Addr: a, Len: 4096, Access: domain.AccessSend}}, m.Registrations())
}

// TestBadInputClosedManager: a closed Manager refuses new registrations
// and caches with netio.ErrClosed, and its accessors still answer.
func TestBadInputClosedManager(t *testing.T) {
	m := open(t, domain.Config{Provider: "sockets"})
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "idempotent")

	mem := make([]byte, 64)
	for name, call := range map[string]func() error{
		"Register": func() error {
			_, err := m.Register(uintptr(unsafe.Pointer(&mem[0])), 64, domain.AccessSend)
			return err
		},
		"AllocRegistered":      func() error { _, err := m.AllocRegistered(4096, domain.AccessSend); return err },
		"NewRegistrationCache": func() error { _, err := m.NewRegistrationCache(domain.CacheConfig{}); return err },
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		assert.ErrorIs(t, err, netio.ErrClosed, name)
	}
	assert.NotPanics(t, func() {
		assert.Equal(t, "sockets", m.Provider(), "the name outlives the domain")
		assert.Equal(t, "127.0.0.1", m.Address())
		assert.Empty(t, m.Info().FabricName(), "a freed Info reads as zero")
		assert.Zero(t, m.Stats().Registrations)
		assert.Empty(t, m.Registrations())
	})
	_, err := m.Domain().OpenCQ(8, false)
	assert.ErrorIs(t, err, fabric.EBADF, "the closed domain refuses, without reaching libfabric")
}

// TestBadInputRegistrationAfterClose: a closed registration keeps its
// description, and closing or detaching it again changes nothing.
func TestBadInputRegistrationAfterClose(t *testing.T) {
	m := open(t, domain.Config{})
	defer func() { assert.NoError(t, m.Close()) }()
	r, err := m.AllocRegistered(4096, domain.AccessRecv)
	require.NoError(t, err)
	other, err := m.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer func() { assert.NoError(t, other.Close()) }()
	desc, key, addr := r.Desc(), r.Key(), r.Addr()
	require.NoError(t, r.Close())

	stats := m.Stats()
	require.NoError(t, r.Close())
	mem, err := r.Detach()
	assert.NoError(t, err)
	assert.Nil(t, mem, "the memory was unmapped by the first Close")
	assert.Equal(t, stats, m.Stats(), "a second Close or Detach changes nothing")
	assert.Len(t, m.Registrations(), 1, "the other registration is untouched")
	assert.Equal(t, []any{desc, key, addr, 4096, domain.AccessRecv}, []any{r.Desc(), r.Key(), r.Addr(), r.Len(), r.Access()})
}

func TestBadInputNewRegistrationCache(t *testing.T) {
	m := open(t, domain.Config{})
	for name, tc := range map[string]struct {
		m   *domain.Manager
		cfg domain.CacheConfig
	}{
		"nil manager":           {nil, domain.CacheConfig{}},
		"negative limit":        {m, domain.CacheConfig{MaxRegistrations: -1}},
		"unknown access":        {m, domain.CacheConfig{Access: domain.AccessSend | 1<<40}},
		"only unknown access":   {m, domain.CacheConfig{Access: 1 << 63}},
		"negative limit on nil": {nil, domain.CacheConfig{MaxRegistrations: -1}},
	} {
		c, err := tc.m.NewRegistrationCache(tc.cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		assert.Nil(t, c, name)
	}
	assert.Zero(t, m.Stats().Registrations)
	assert.NoError(t, m.Close(), "refused caches hold nothing")
}
