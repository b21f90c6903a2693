package sendcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

// TestInjectBoundReadsTheCounterOnlyNearTheBound: an inject is refused
// (full) once the provider holds maxHeld sends, posted less sent; the
// counter is read only when posted less its last reading reaches the
// bound, and that reading is kept; without a counter nothing is bounded.
// The counter here is bound to no endpoint, so it reads 0; flushed stands
// for sends it counted.
func TestInjectBoundReadsTheCounterOnlyNearTheBound(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	cntr, err := mgr.Domain().OpenCounter()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cntr.Close()) })

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
