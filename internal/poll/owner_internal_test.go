package poll

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// idHandler is a handler that knows the owner it was registered as.
type idHandler struct{ id uint32 }

func (idHandler) HandleCompletion(uint32, Result) {}
func (idHandler) HandleEvent(fabric.Event)        {}

// TestOwnerTableFindsEveryOwner: the owner table finds each registered
// owner's handler and no other, by scanning a small table and by halving
// a large one, through registrations and unregistrations in any order;
// an unregistered owner's ID, and IDs never given, find nothing.
func TestOwnerTableFindsEveryOwner(t *testing.T) {
	p := &Poller{}
	p.owners.Store(&ownerTable{})
	_, ok := p.owners.Load().find(1)
	assert.False(t, ok, "an empty table")

	live := map[uint32]bool{}
	check := func(stage string) {
		t.Helper()
		tab := *p.owners.Load()
		assert.Len(t, tab, len(live), stage)
		assert.Equal(t, len(live), p.Owners(), stage)
		for id := uint32(0); id <= p.nextID+1; id++ {
			h, found := tab.find(id)
			if assert.Equal(t, live[id], found, "%s: owner %d", stage, id) && found {
				assert.Equal(t, idHandler{id}, h, "%s: owner %d's handler", stage, id)
			}
		}
	}
	for range 3 * scanOwners {
		o, err := p.Register(idHandler{p.nextID + 1})
		require.NoError(t, err)
		live[o.id] = true
		if len(live) == 1 || len(live) == scanOwners || len(live) == scanOwners+1 {
			check("registered")
		}
	}
	check("registered")
	for _, id := range []uint32{1, 24, 12, 2, 23, 9, 10, 16} { // ends, middle, both sides of a halving
		before := p.owners.Load()
		want := slices.Clone(*before)
		p.Unregister(Owner{id: id})
		delete(live, id)
		check("unregistered")
		// The poller goroutine may be reading the published table: it is
		// copied, never changed in place.
		assert.Equal(t, want, *before, "unregistering %d left the table it replaced as it was", id)
	}
	p.Unregister(Owner{id: 12})
	p.Unregister(Owner{id: 99})
	check("unregistering an unknown owner changes nothing")
	for id := range live {
		p.Unregister(Owner{id: id})
		delete(live, id)
	}
	check("all unregistered")
	o, err := p.Register(idHandler{p.nextID + 1})
	require.NoError(t, err)
	assert.Equal(t, uint32(3*scanOwners+1), o.id, "IDs are never reused")
	live[o.id] = true
	check("registered again")
}
