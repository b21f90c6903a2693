package rdm

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/fabric"
)

// TestFromChecksTheLastSenderAgainstTheTable: from names the sender of a
// receive by its address; the sender it found last is checked first, but
// only as the current table has it: once that peer is removed a message
// from its address names no peer, and once its slot and address belong to
// a peer added later, that peer (its new generation). The fast path is
// seen at work: a sender found through the map is kept, and found again
// in a table without the map.
func TestFromChecksTheLastSenderAgainstTheTable(t *testing.T) {
	const addrA, addrB fabric.Addr = 5, 7
	var ps peers
	ps.table.Store(&peerTable{
		entries: []peerEntry{{}, {addr: addrA, gen: 1, live: true}, {addr: addrB, gen: 1, live: true}},
		byAddr:  map[fabric.Addr]uint32{addrA: 1, addrB: 2},
	})
	a, b := Peer{slot: 1, gen: 1}, Peer{slot: 2, gen: 1}
	assert.Equal(t, a, ps.from(addrA))
	assert.Equal(t, addrA, ps.lastSrc, "found through the map: kept to check first")
	assert.Equal(t, a, ps.lastFrom)
	full := ps.table.Load()
	ps.table.Store(&peerTable{entries: full.entries}) // the same peers, no map: only the fast path finds a
	assert.Equal(t, a, ps.from(addrA), "again: the last sender, checked against the table first")
	ps.table.Store(full)
	assert.Equal(t, b, ps.from(addrB), "another sender")
	assert.Equal(t, Peer{}, ps.from(9), "an address of no peer")
	assert.Equal(t, b, ps.from(addrB), "an unknown sender leaves the last one as it was")

	ps.table.Store(&peerTable{ // b removed
		entries: []peerEntry{{}, {addr: addrA, gen: 1, live: true}, {addr: addrB, gen: 1}},
		byAddr:  map[fabric.Addr]uint32{addrA: 1},
	})
	assert.Equal(t, Peer{}, ps.from(addrB), "the last sender, removed")
	assert.Equal(t, a, ps.from(addrA))

	ps.table.Store(&peerTable{ // a removed, and a new peer in its slot at the same address
		entries: []peerEntry{{}, {addr: addrA, gen: 2, live: true}, {addr: addrB, gen: 1}},
		byAddr:  map[fabric.Addr]uint32{addrA: 1},
	})
	assert.Equal(t, Peer{slot: 1, gen: 2}, ps.from(addrA), "the new peer at the last sender's address")

	ps.table.Store(&peerTable{ // the new peer moved to another address, and b's address given to no one
		entries: []peerEntry{{}, {addr: addrB, gen: 2, live: true}, {addr: addrB, gen: 1}},
		byAddr:  map[fabric.Addr]uint32{addrB: 1},
	})
	assert.Equal(t, Peer{}, ps.from(addrA), "the last sender's slot no longer at its address")

	ps.noSources = true
	assert.Equal(t, Peer{}, ps.from(addrB), "a provider that names no senders")
}
