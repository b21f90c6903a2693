package poll

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
)

// nopHandler is a Handler that ignores everything.
type nopHandler struct{}

func (nopHandler) HandleCompletion(uint32, Result) {}
func (nopHandler) HandleEvent(ev fabric.Event)     { ev.Info.Free() }

func openDomain(t *testing.T) *domain.Manager {
	t.Helper()
	m, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	return m
}

// TestBadInputOpen: nil or closed queues' parents and every out-of-range
// setting are refused with the documented sentinel, and no poller
// goroutine is left behind (TestMain checks).
func TestBadInputOpen(t *testing.T) {
	m := openDomain(t)
	defer func() { assert.NoError(t, m.Close()) }()
	closed := openDomain(t)
	require.NoError(t, closed.Close())

	for name, tc := range map[string]struct {
		fab  *fabric.Fabric
		dom  *fabric.Domain
		cfg  Config
		want error
	}{
		"nil fabric":        {nil, m.Domain(), Config{}, netio.ErrInvalidArgument},
		"nil domain":        {m.Fabric(), nil, Config{}, netio.ErrInvalidArgument},
		"closed domain":     {m.Fabric(), closed.Domain(), Config{}, netio.ErrClosed},
		"closed fabric":     {closed.Fabric(), m.Domain(), Config{}, netio.ErrClosed},
		"unknown mode":      {m.Fabric(), m.Domain(), Config{Mode: BusyPoll + 1}, netio.ErrInvalidArgument},
		"negative size":     {m.Fabric(), m.Domain(), Config{Size: -1}, netio.ErrInvalidArgument},
		"size above max":    {m.Fabric(), m.Domain(), Config{Size: MaxSize + 1}, netio.ErrInvalidArgument},
		"huge size":         {m.Fabric(), m.Domain(), Config{Size: math.MaxInt}, netio.ErrInvalidArgument},
		"negative MaxBlock": {m.Fabric(), m.Domain(), Config{MaxBlock: -time.Nanosecond}, netio.ErrInvalidArgument},
	} {
		var p *Poller
		var err error
		require.NotPanics(t, func() { p, err = Open(tc.fab, tc.dom, tc.cfg) }, name)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, p, name)
	}
}

// TestBadInputPoller: a nil handler, unknown owners and nil functions are
// refused or ignored without changing the poller, before and after Close.
func TestBadInputPoller(t *testing.T) {
	m := openDomain(t)
	defer func() { assert.NoError(t, m.Close()) }()
	p, err := Open(m.Fabric(), m.Domain(), Config{})
	require.NoError(t, err)
	kept, err := p.Register(nopHandler{})
	require.NoError(t, err)

	check := func(stage string) {
		t.Helper()
		owners, stats := p.Owners(), p.Stats()
		o, err := p.Register(nil)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "%s: nil handler", stage)
		assert.False(t, o.Valid(), stage)
		require.NotPanics(t, func() {
			p.Unregister(Owner{})                // never registered
			p.Unregister(Owner{id: kept.id + 7}) // unknown
			p.Do(nil)
			p.AtStop(nil)
		}, stage)
		assert.Equal(t, owners, p.Owners(), "%s: owners unchanged", stage)
		assert.Equal(t, stats.Dropped, p.Stats().Dropped, stage)
	}
	check("open")
	require.NoError(t, p.Close())
	check("closed")
	require.NoError(t, p.Close(), "idempotent")
	_, err = p.Register(nopHandler{})
	assert.ErrorIs(t, err, netio.ErrClosed)
}

// TestBadInputPollTimeout: MaxBlock below a millisecond still blocks
// (rounded up; 0 would make every wait a spin), and a bound too large for
// poll's int is capped instead of wrapping to a negative, endless wait.
func TestBadInputPollTimeout(t *testing.T) {
	for d, want := range map[time.Duration]int{
		time.Nanosecond:                1,
		999 * time.Microsecond:         1,
		time.Millisecond:               1,
		time.Millisecond + 1:           2,
		DefaultMaxBlock:                50,
		time.Duration(math.MaxInt64):   math.MaxInt32,
		time.Duration(1<<31) * 1000000: math.MaxInt32,
	} {
		assert.Equal(t, want, pollTimeout(d), "%v", d)
	}
}
