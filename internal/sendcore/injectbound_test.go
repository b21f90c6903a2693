package sendcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
)

// TestInjectBoundReadsTheCounterOnlyNearTheBound: an inject is refused
// (full) once the provider holds maxHeld sends, posted less sent; the
// counter is read only when posted less its last reading reaches the
// bound, and that reading is kept; without a counter nothing is bounded.
// The counter here is bound to no endpoint, so it reads 0; flushed stands
// for sends it counted.
func TestInjectBoundReadsTheCounterOnlyNearTheBound(t *testing.T) {
	cntr := openTestCounter(t)
	var c Core
	c.ConfirmInjects(cntr, 0, 3)
	f := &c.conf
	f.posted.Store(2)
	assert.False(t, f.full(), "2 held of 3")
	f.posted.Store(3)
	assert.True(t, f.full(), "3 held of 3: the next is refused")
	f.flushed.Add(1)
	assert.False(t, f.full(), "one sent: 2 held")
	assert.Equal(t, uint64(1), f.seen.Load(), "the reading is kept")

	f.seen.Store(10) // as if read when 10 were sent
	f.posted.Store(11)
	assert.False(t, f.full(), "the estimate, 1 held, is below the bound")
	assert.Equal(t, uint64(10), f.seen.Load(), "so the counter was not read")
	f.posted.Store(13)
	assert.True(t, f.full(), "the estimate reaches the bound: read, 12 held")
	assert.Equal(t, uint64(1), f.seen.Load(), "the reading replaced the estimate")

	var def Core
	def.ConfirmInjects(cntr, 0, 0)
	assert.Equal(t, uint64(DefaultMaxHeld), def.conf.maxHeld, "0: the default")
	var none Core
	none.conf.posted.Store(1 << 40)
	assert.False(t, none.conf.full(), "no counter: no bound")
}

// openTestCounter opens a send counter on a tcp domain, bound to no
// endpoint: it reads 0.
func openTestCounter(t *testing.T) *fabric.Counter {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	cntr, err := mgr.Domain().OpenCounter()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cntr.Close()) })
	return cntr
}

// TestInjectRefusalChangesNothing: an inject refused at the bound gives
// back the report place it reserved and posts nothing; SendRegular posts
// the same send the regular way, not refused, counted as a regular send
// the provider holds.
func TestInjectRefusalChangesNothing(t *testing.T) {
	var c Core
	c.ConfirmInjects(openTestCounter(t), 0, 2)
	c.inj.done.ring = make([]report, 4)
	c.inj.size = 64
	c.inj.post = func(*fabric.Endpoint, uint32, int) fabric.Errno {
		t.Error("an inject posted past the bound")
		return 0
	}
	var regular []uint32
	c.postSend = func(_ *fabric.Endpoint, key uint32, _ int) fabric.Errno {
		regular = append(regular, key)
		return 0
	}
	c.conf.posted.Store(2) // the provider holds 2 of 2

	assert.Equal(t, netio.NoResources, c.Send(nil, 7, 8, 8), "at the bound")
	assert.Zero(t, c.inj.done.used.Load(), "the report place is given back")
	assert.Equal(t, uint64(2), c.conf.posted.Load(), "nothing counted taken")
	assert.Empty(t, regular, "nor posted the regular way")

	assert.Equal(t, netio.OK, c.SendRegular(nil, 7, 8, 8), "a regular send is not refused for the bound")
	assert.Equal(t, []uint32{7}, regular)
	assert.Zero(t, c.inj.done.used.Load(), "it takes no report place")
	assert.Equal(t, uint64(3), c.conf.posted.Load(), "counted taken")
	assert.Equal(t, int64(1), c.conf.regular.Load(), "with a completion to come")
}
