package rdm

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/coalescer"
	"github.com/netio-go/netio/internal/quirks"
)

// Peer names a peer of an Endpoint: a small value to send to, and the
// sender of a receive. The zero Peer is no peer. A Peer stays valid until
// RemovePeer; a removed one is refused, even if the provider reuses its
// address for another peer.
type Peer struct {
	slot uint32 // index in the peer table, from 1
	gen  uint32 // the slot's generation when the peer was added
}

// Valid reports whether p names a peer (it may have been removed since).
func (p Peer) Valid() bool { return p.slot != 0 }

// word packs p into the uint64 a table keeps per send; peerOf unpacks it.
func (p Peer) word() uint64 { return uint64(p.slot)<<32 | uint64(p.gen) }

func peerOf(w uint64) Peer { return Peer{slot: uint32(w >> 32), gen: uint32(w)} }

// peerEntry is one slot of the peer table.
type peerEntry struct {
	addr fabric.Addr
	gen  uint32
	name string // the address it was added by, or learned from the provider
	raw  string // the raw name inserted into the address vector (byRaw's key)
	live bool
	co   *coalescer.Coalescer // its coalescing buffer, when Config.Coalesce is set
}

// peerTable is a snapshot of the peers: read without a lock on the send
// and receive paths, replaced whole (copy on write) by AddPeer and
// RemovePeer, which are rare next to sends.
type peerTable struct {
	entries []peerEntry // by slot; entries[0] unused
	byAddr  map[fabric.Addr]uint32
	// byRaw finds a live peer by the raw name it was inserted as, so that
	// adding an address again never inserts it again: sockets' fi_av_insert
	// gives a duplicate a new entry (sock_av.c keeps no index of names),
	// and the utility providers' count the insert, so that one
	// fi_av_remove no longer takes the entry out.
	byRaw map[string]uint32
}

// emptyTable is a table without peers.
func emptyTable() *peerTable {
	return &peerTable{entries: make([]peerEntry, 1), byAddr: map[fabric.Addr]uint32{}, byRaw: map[string]uint32{}}
}

// clone copies t for a change.
func (t *peerTable) clone() *peerTable {
	c := &peerTable{entries: append([]peerEntry(nil), t.entries...),
		byAddr: make(map[fabric.Addr]uint32, len(t.byAddr)+1), byRaw: make(map[string]uint32, len(t.byRaw)+1)}
	for k, v := range t.byAddr {
		c.byAddr[k] = v
	}
	for k, v := range t.byRaw {
		c.byRaw[k] = v
	}
	return c
}

// peers is an endpoint's peer table and the address vector behind it.
type peers struct {
	av   *fabric.AV
	prov string
	max  int

	mu        sync.Mutex // AddPeer and RemovePeer, one at a time
	table     atomic.Pointer[peerTable]
	reserved  []fabric.Addr // inserted for the provider's sake, not peers
	noSources bool          // quirks.Quirks.NoSources: never name a sender
	// lastSrc and lastFrom are the source and peer from last found, to
	// check first (see from). Poller goroutine only.
	lastSrc  fabric.Addr
	lastFrom Peer
	// newCo starts a new peer's coalescer; nil when not coalescing.
	newCo func(p Peer, name string) *coalescer.Coalescer
}

func (ps *peers) init(av *fabric.AV, provider string, max int) {
	ps.av, ps.prov, ps.max = av, provider, max
	ps.noSources = quirks.For(provider).NoSources
	ps.table.Store(emptyTable())
}

// lookup returns the address of a live peer.
func (ps *peers) lookup(p Peer) (fabric.Addr, bool) {
	t := ps.table.Load()
	if p.slot == 0 || int(p.slot) >= len(t.entries) {
		return 0, false
	}
	e := &t.entries[p.slot]
	return e.addr, e.live && e.gen == p.gen
}

// from returns the peer a receive came from, the zero Peer when the
// sender was not added (the providers here report such a sender as
// fabric.AddrNotAvail, and learn no address for it by themselves).
//
// It runs on the poller goroutine, and checks the peer it found last
// first: messages tend to come from the peer of the one before (a reply,
// a stream), and that check against the current table costs a few
// compares where the map costs a hash probe, on the way from a read to
// OnData. The peer it found last is the sender when it is still live, with
// the same generation and address: a live peer's address is no other live
// peer's (AddPeer gives back the peer already added at an address), and a
// removed one is not live, or its slot holds a newer generation.
func (ps *peers) from(src fabric.Addr) Peer {
	if ps.noSources {
		return Peer{}
	}
	t := ps.table.Load()
	if p := ps.lastFrom; src == ps.lastSrc && int(p.slot) < len(t.entries) {
		if e := &t.entries[p.slot]; e.live && e.gen == p.gen && e.addr == src {
			return p
		}
	}
	if slot, ok := t.byAddr[src]; ok {
		p := Peer{slot: slot, gen: t.entries[slot].gen}
		ps.lastSrc, ps.lastFrom = src, p
		return p
	}
	return Peer{}
}

// rawName returns addr ("HOST:PORT", or a name for named-address
// providers) as the raw name the peer's endpoint has, which the address
// vector takes: a sockaddr for the IP providers (udp;ofi_rxd has no
// fi_av_insertsvc), the string itself for the others.
func (ps *peers) rawName(addr string) ([]byte, error) {
	if quirks.For(ps.prov).NamedAddresses {
		if addr == "" {
			return nil, fmt.Errorf("%w: rdm: empty peer name", netio.ErrBadAddress)
		}
		if err := checkRetired(ps.prov, addr); err != nil {
			return nil, err
		}
		if strings.IndexByte(addr, 0) >= 0 {
			// shm reads a name up to its NUL: the name would be another
			// peer's under other bytes, and taking it out again (smr_av_remove)
			// would unmap that peer's region.
			return nil, fmt.Errorf("%w: rdm: peer name %q holds a NUL byte", netio.ErrBadAddress, addr)
		}
		return []byte(addr), nil
	}
	return sockaddr(addr)
}

// reserveZero inserts the endpoint's own name first, so that address 0,
// which a provider with quirks.Quirks.UnknownSourceIsZero reports for
// senders it does not know, names no peer.
func (ps *peers) reserveZero(ep *fabric.Endpoint) error {
	self, err := ep.Name()
	if err != nil {
		return err
	}
	fa, err := ps.av.Insert(self)
	if err != nil {
		return fmt.Errorf("reserving address 0: %w", err)
	}
	if fa != 0 {
		return fmt.Errorf("reserving address 0: the provider gave %v", fa)
	}
	ps.reserved = append(ps.reserved, fa)
	return nil
}

// add inserts addr and gives it a slot.
func (ps *peers) add(addr string) (Peer, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	old := ps.table.Load()
	raw, err := ps.rawName(addr)
	if err != nil {
		return Peer{}, fmt.Errorf("rdm: add peer %q: %w", addr, err)
	}
	if slot, dup := old.byRaw[string(raw)]; dup { // the same peer, added again: held already, even at MaxPeers
		return Peer{slot: slot, gen: old.entries[slot].gen}, nil
	}
	if live := len(old.byAddr); live >= ps.max {
		return Peer{}, fmt.Errorf("%w: rdm: %d peers, the most MaxPeers allows", netio.ErrNoResources, live)
	}
	fa, err := ps.av.Insert(raw)
	if err != nil {
		return Peer{}, fmt.Errorf("rdm: add peer %q: %w", addr, err)
	}
	if slot, dup := old.byAddr[fa]; dup {
		// The provider took another name for the same address (the name's
		// bytes differ, the endpoint is one): keep one entry, and give
		// back the count this insert added.
		if err := ps.av.Remove(fa); err != nil {
			return Peer{}, fmt.Errorf("rdm: add peer %q: giving back a second insert of a held address: %w", addr, err)
		}
		return Peer{slot: slot, gen: old.entries[slot].gen}, nil
	}
	return ps.store(old, fa, addr, string(raw)), nil
}

// store puts a new peer with address fa, added as name and inserted as
// raw, into a copy of old. mu is held.
func (ps *peers) store(old *peerTable, fa fabric.Addr, name, raw string) Peer {
	t := old.clone()
	slot := uint32(0)
	for i := 1; i < len(t.entries); i++ {
		if !t.entries[i].live {
			slot = uint32(i)
			break
		}
	}
	if slot == 0 {
		t.entries = append(t.entries, peerEntry{})
		slot = uint32(len(t.entries) - 1)
	}
	e := &t.entries[slot]
	*e = peerEntry{addr: fa, gen: e.gen + 1, name: name, raw: raw, live: true}
	p := Peer{slot: slot, gen: e.gen}
	if ps.newCo != nil {
		e.co = ps.newCo(p, name)
	}
	t.byAddr[fa], t.byRaw[raw] = slot, slot
	ps.table.Store(t)
	return p
}

// coalescer returns the coalescer of a live peer, or nil.
func (ps *peers) coalescer(p Peer) *coalescer.Coalescer {
	t := ps.table.Load()
	if p.slot == 0 || int(p.slot) >= len(t.entries) {
		return nil
	}
	if e := &t.entries[p.slot]; e.live && e.gen == p.gen {
		return e.co
	}
	return nil
}

// eachCoalescer calls fn for the coalescer of every live peer.
func (ps *peers) eachCoalescer(fn func(*coalescer.Coalescer)) {
	t := ps.table.Load()
	for i := range t.entries {
		if e := &t.entries[i]; e.live && e.co != nil {
			fn(e.co)
		}
	}
}

// remove takes p out of the table and the address vector and returns its
// coalescer, for the caller to end.
func (ps *peers) remove(p Peer) (*coalescer.Coalescer, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	old := ps.table.Load()
	if p.slot == 0 || int(p.slot) >= len(old.entries) || !old.entries[p.slot].live || old.entries[p.slot].gen != p.gen {
		return nil, fmt.Errorf("%w: rdm: unknown or removed peer", netio.ErrInvalidArgument)
	}
	fa, co := old.entries[p.slot].addr, old.entries[p.slot].co
	if err := ps.av.Remove(fa); err != nil {
		return nil, fmt.Errorf("rdm: remove peer: %w", err)
	}
	t := old.clone()
	delete(t.byAddr, fa)
	delete(t.byRaw, old.entries[p.slot].raw)
	t.entries[p.slot].live, t.entries[p.slot].co = false, nil
	ps.table.Store(t)
	return co, nil
}

// name returns the address p was added by.
func (ps *peers) name(p Peer) string {
	t := ps.table.Load()
	if p.slot == 0 || int(p.slot) >= len(t.entries) || t.entries[p.slot].gen != p.gen {
		return ""
	}
	return t.entries[p.slot].name
}

// nameOfSlot returns the address of the peer in slot, for logs.
func (ps *peers) nameOfSlot(slot uint32) string {
	t := ps.table.Load()
	if int(slot) >= len(t.entries) {
		return ""
	}
	return t.entries[slot].name
}

// count returns the live peers.
func (ps *peers) count() int { return len(ps.table.Load().byAddr) }

// removeAll empties the address vector at Close.
func (ps *peers) removeAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	t := ps.table.Load()
	for fa := range t.byAddr {
		_ = ps.av.Remove(fa)
	}
	for _, fa := range ps.reserved {
		_ = ps.av.Remove(fa)
	}
	ps.reserved = nil
	ps.table.Store(emptyTable())
}
