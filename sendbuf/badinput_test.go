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

func openDomain(t *testing.T, cfg domain.Config) *domain.Manager {
	t.Helper()
	cfg.Provider, cfg.Address = "tcp", "127.0.0.1"
	m, err := domain.Open(cfg)
	require.NoError(t, err)
	return m
}

// TestBadInputConstructors: every constructor refuses what it cannot use
// with the documented sentinel and registers nothing.
func TestBadInputConstructors(t *testing.T) {
	m := openDomain(t, domain.Config{MaxRegistrations: 1})
	defer func() { assert.NoError(t, m.Close()) }()
	closed := openDomain(t, domain.Config{})
	require.NoError(t, closed.Close())
	recvOnly, err := pool.New(m, pool.Config{Size: 64, Access: domain.AccessRecv})
	require.NoError(t, err)
	defer func() { assert.NoError(t, recvOnly.Close()) }()
	sendPool, err := pool.New(m, pool.Config{Size: 64})
	require.NoError(t, err)
	require.NoError(t, sendPool.Close())
	// Pools that could send but also let a peer write into the buffers, or
	// receive into them: more access than a send buffer may have.
	sendRemoteWrite, err := pool.New(m, pool.Config{Size: 64, Access: domain.AccessSend | domain.AccessRemoteWrite})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sendRemoteWrite.Close()) }()
	sendRecv, err := pool.New(m, pool.Config{Size: 64, Access: domain.AccessSend | domain.AccessRecv})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sendRecv.Close()) }()
	held, err := m.AllocRegistered(64, domain.AccessSend) // the one registration the domain allows
	require.NoError(t, err)
	defer func() { assert.NoError(t, held.Close()) }()

	cases := map[string]struct {
		open func() error
		want error
	}{
		"NewPool region too large": {func() error {
			_, err := sendbuf.NewPool(m, netio.MaxBufferSize, netio.MaxBufferCount)
			return err
		}, netio.ErrInvalidArgument},
		"NewPool nil domain":    {func() error { _, err := sendbuf.NewPool(nil, 64, 4); return err }, netio.ErrInvalidArgument},
		"NewPool closed domain": {func() error { _, err := sendbuf.NewPool(closed, 64, 4); return err }, netio.ErrClosed},
		"NewPool domain full":   {func() error { _, err := sendbuf.NewPool(m, 64, 4); return err }, netio.ErrNoResources},
		"NewPoolFrom nil pool":  {func() error { _, err := sendbuf.NewPoolFrom(nil, 64, 4); return err }, netio.ErrInvalidArgument},
		"NewPoolFrom receive-only pool": {func() error {
			_, err := sendbuf.NewPoolFrom(recvOnly, 64, 1)
			return err
		}, netio.ErrInvalidArgument},
		"NewPoolFrom send and remote-write pool": {func() error {
			_, err := sendbuf.NewPoolFrom(sendRemoteWrite, 64, 1)
			return err
		}, netio.ErrInvalidArgument},
		"NewPoolFrom send and receive pool": {func() error {
			_, err := sendbuf.NewPoolFrom(sendRecv, 64, 1)
			return err
		}, netio.ErrInvalidArgument},
		"NewPoolFrom closed pool":    {func() error { _, err := sendbuf.NewPoolFrom(sendPool, 64, 1); return err }, netio.ErrClosed},
		"NewPoolFrom negative count": {func() error { _, err := sendbuf.NewPoolFrom(sendPool, 64, -1); return err }, netio.ErrInvalidArgument},
		"NewSendBufferManager negative size": {func() error {
			_, err := sendbuf.NewSendBufferManager(m, netio.BufferedSendParams{BufferSize: -1})
			return err
		}, netio.ErrInvalidArgument},
		"NewSendBufferManager nil domain": {func() error {
			_, err := sendbuf.NewSendBufferManager(nil, netio.BufferedSendParams{BufferSize: 64, BufferCount: 2})
			return err
		}, netio.ErrInvalidArgument},
		"NewSendBufferManager closed domain": {func() error {
			_, err := sendbuf.NewSendBufferManager(closed, netio.BufferedSendParams{BufferSize: 64, BufferCount: 2})
			return err
		}, netio.ErrClosed},
	}
	before, mapped := m.Stats().Registrations, domain.MappedBytes()
	for name, tc := range cases {
		var err error
		require.NotPanics(t, func() { err = tc.open() }, name)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Equal(t, before, m.Stats().Registrations, "%s: nothing registered", name)
		assert.Equal(t, mapped, domain.MappedBytes(), "%s: nothing left mapped", name)
		assert.Zero(t, sendRemoteWrite.Stats().InUse()+sendRecv.Stats().InUse(), "%s: nothing leased", name)
	}
}

// poolState is what a refused call must leave as it was.
type poolState struct {
	free          int
	posted, other []uint64
}

func stateOf(p *sendbuf.Pool) poolState {
	return poolState{free: p.Free(), posted: p.Posted(nil, me), other: p.Posted(nil, other)}
}

// TestBadInputPoolCalls: unknown IDs, other holders' buffers, foreign and
// nil buffers, and repeated hand-backs are refused and change nothing.
func TestBadInputPoolCalls(t *testing.T) {
	p, _ := newPool(t, 64, 4)
	q, _ := newPool(t, 64, 1)
	foreign := q.Get(me)
	leased := p.Get(me)
	posted := p.Get(me)
	require.True(t, p.MarkPosted(posted, me))
	theirs := p.Get(other)
	before := stateOf(p)

	refused := map[string]func() bool{
		"Release unknown ID":         func() bool { return p.Release(4, me) != netio.OK },
		"Release max ID":             func() bool { return p.Release(^uint64(0), me) != netio.OK },
		"Release other's buffer":     func() bool { return p.Release(theirs.ID(), me) != netio.OK },
		"Release posted buffer":      func() bool { return p.Release(posted.ID(), me) != netio.OK },
		"Release free buffer":        func() bool { return p.Release(3, me) != netio.OK },
		"Complete unknown ID":        func() bool { return !p.Complete(4, me) },
		"Complete leased buffer":     func() bool { return !p.Complete(leased.ID(), me) },
		"Complete by another holder": func() bool { return !p.Complete(posted.ID(), other) },
		"MarkPosted other's buffer":  func() bool { return !p.MarkPosted(theirs, me) },
		"MarkPosted twice":           func() bool { return !p.MarkPosted(posted, me) },
		"Lookup unknown ID":          func() bool { return p.Lookup(4) == nil && p.Lookup(^uint64(0)) == nil },
		"Owns nil":                   func() bool { return !p.Owns(nil) },
		"Owns foreign buffer":        func() bool { return !p.Owns(foreign) },
		"Reclaim unknown holder":     func() bool { return p.Reclaim(99) == 0 },
		"Unpost a leased buffer":     func() bool { p.Unpost(leased); return true },
		"Get for holder 0":           func() bool { return p.Get(0) == nil },
		"MarkPosted nil":             func() bool { return !p.MarkPosted(nil, me) },
		"Unpost nil":                 func() bool { p.Unpost(nil); return true },
		"MarkPosted foreign buffer": func() bool {
			return !p.MarkPosted(foreign, me) && len(q.Posted(nil, me)) == 0
		},
	}
	for name, call := range refused {
		var ok bool
		require.NotPanics(t, func() { ok = call() }, name)
		assert.True(t, ok, "%s: accepted", name)
		assert.Equal(t, before, stateOf(p), "%s: state changed", name)
	}
	assert.Equal(t, netio.InvalidArgument, p.Release(leased.ID(), other), "still mine")
	require.True(t, q.MarkPosted(foreign, me))
	p.Unpost(foreign)
	assert.Equal(t, []uint64{foreign.ID()}, q.Posted(nil, me), "Unpost leaves another pool's buffer posted")
	q.Unpost(foreign)

	// A refused Close changes nothing either.
	assert.ErrorIs(t, p.Close(), netio.ErrNoResources)
	assert.Equal(t, before, stateOf(p))
	assert.NotNil(t, p.Get(me), "still open")
	require.True(t, p.Complete(posted.ID(), me))
	assert.Equal(t, netio.OK, q.Release(foreign.ID(), me))
}

// TestBadInputSharedManager: attach and detach out of turn are refused or
// ignored, and a refused Close leaves the manager usable.
func TestBadInputSharedManager(t *testing.T) {
	m := openDomain(t, domain.Config{})
	defer func() { assert.NoError(t, m.Close()) }()
	sm, err := sendbuf.NewSendBufferManager(m, netio.BufferedSendParams{BufferSize: 64, BufferCount: 2})
	require.NoError(t, err)

	sm.Detach() // never attached: must not go negative
	require.NoError(t, sm.Attach())
	assert.ErrorIs(t, sm.Close(), netio.ErrNoResources, "an endpoint is attached")
	assert.Equal(t, 1, m.Stats().Registrations, "a refused Close changes nothing")
	assert.NotNil(t, sm.Pool().Get(me), "still usable")
	assert.Equal(t, 1, sm.Pool().Reclaim(me))
	sm.Detach()
	require.NoError(t, sm.Close(), "one Detach undoes one Attach, whatever came before")
	assert.Zero(t, m.Stats().Registrations)
	require.NoError(t, sm.Close(), "idempotent")
	assert.ErrorIs(t, sm.Attach(), netio.ErrClosed)
	assert.Nil(t, sm.Pool().Get(me))
}

// TestBadInputGetOnClosedPool: a Get the closed pool refuses, like one for
// holder 0, leaves the fewest-free count NumAvailable reports as it was.
func TestBadInputGetOnClosedPool(t *testing.T) {
	p, _ := newPool(t, 64, 4)
	held := p.Get(me)
	require.NotNil(t, held)
	require.Equal(t, 3, p.NumAvailable(), "starts an interval at 3 free")
	assert.Nil(t, p.Get(0), "holder 0 is no holder")
	require.NoError(t, p.Close())
	assert.Nil(t, p.Get(me), "closed")
	assert.Equal(t, 3, p.Free())
	assert.Equal(t, 3, p.NumAvailable(), "refused Gets took nothing")
	assert.Equal(t, netio.OK, p.Release(held.ID(), me))
}
