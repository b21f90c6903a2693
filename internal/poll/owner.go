package poll

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// Result is the outcome of one posted operation.
type Result struct {
	Status netio.Status // OK, Failed, or Canceled
	Errno  fabric.Errno // the libfabric error for a failure, else 0
	Flags  uint64       // fabric.FlagSend, fabric.FlagRecv, ...
	Len    int          // bytes received, for receives
	Source fabric.Addr  // a receive's sender on a connectionless endpoint
	// Unposted marks a receive queued by Repost that the provider refused
	// to post (Status Failed, Errno its error): the buffer was never
	// posted, and no completion follows.
	Unposted bool
}

// Handler owns operations posted with contexts from its Owner. Its methods
// run on the poller goroutine and must not block.
type Handler interface {
	// HandleCompletion is called once per completed operation, with the key
	// the operation was posted with.
	HandleCompletion(key uint32, r Result)
	// HandleEvent is called for connection events of the endpoints opened
	// with the Owner's EndpointContext. For EventConnReq the handler owns
	// ev.Info and must free it.
	HandleEvent(ev fabric.Event)
}

// Owner routes completions and events to one Handler. Operations are
// posted with Context(key); endpoints are opened with EndpointContext.
type Owner struct {
	id uint32
}

// Context returns the operation context for key: the owner's ID in the
// upper 32 bits and key in the lower.
func (o Owner) Context(key uint32) uint64 { return uint64(o.id)<<32 | uint64(key) }

// UnreportedKey is the key of operations posted without a report of their
// own (Owner.Context(UnreportedKey)): counted injects, which a send
// counter confirms. Their handler never sees them: an error completion of
// one (tcp writes one for each it flushes at fi_close or on a broken
// connection, often after its owner has unregistered) is counted in
// Stats.Unreported, not in Errors or Dropped. No owner's keys reach it.
const UnreportedKey = ^uint32(0)

// EndpointContext returns the context to open endpoints with, so that their
// connection events reach the owner.
func (o Owner) EndpointContext() uint64 { return uint64(o.id) << 32 }

// Valid reports whether the owner was returned by Register.
func (o Owner) Valid() bool { return o.id != 0 }

// Register adds a handler and returns its Owner. Its completions and events
// are delivered until Unregister. A nil handler is an error matching
// netio.ErrInvalidArgument.
func (p *Poller) Register(h Handler) (Owner, error) {
	if h == nil {
		return Owner{}, fmt.Errorf("%w: cq: register a nil handler", netio.ErrInvalidArgument)
	}
	p.regMu.Lock()
	defer p.regMu.Unlock()
	if p.stopping.Load() {
		return Owner{}, fmt.Errorf("cq: register: %w", netio.ErrClosed)
	}
	if p.nextID == ^uint32(0) {
		return Owner{}, fmt.Errorf("%w: cq: owner IDs exhausted", netio.ErrNoResources)
	}
	p.nextID++ // IDs are never reused, so a late completion never reaches a new owner
	old := *p.owners.Load()
	next := append(make(ownerTable, 0, len(old)+1), old...)
	next = append(next, ownerEntry{id: p.nextID, h: h}) // the largest ID: the table stays sorted
	p.owners.Store(&next)
	return Owner{id: p.nextID}, nil
}

// Unregister removes the owner's handler. Completions and events for it that
// are read later are counted as dropped.
func (p *Poller) Unregister(o Owner) {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	old := *p.owners.Load()
	i, ok := old.index(o.id)
	if !ok {
		return
	}
	next := slices.Delete(slices.Clone(old), i, i+1)
	p.owners.Store(&next)
}

// handTo passes r to the handler of the owner named by ctx's upper half,
// under ctx's lower half (the owner's key), after adding one to counted
// when that is not nil; a completion of no registered owner is counted in
// dropped instead, and counted is left alone. Poller goroutine only: the
// paths read one completion at a time (error completions and the reposts
// a read refused), not the batch loop, which looks its owners up once per
// batch.
func (p *Poller) handTo(ctx uint64, r Result, counted *atomic.Uint64) {
	h, found := p.owners.Load().find(uint32(ctx >> 32))
	if !found {
		p.dropped.Add(1)
		return
	}
	if counted != nil {
		counted.Add(1)
	}
	h.HandleCompletion(uint32(ctx), r)
}

// ownerEntry is one registered handler and its owner's ID.
type ownerEntry struct {
	id uint32
	h  Handler
}

// ownerTable is the registered handlers by increasing owner ID (Register
// appends the newest, which has the largest ID; Unregister removes one),
// copied on write and read without a lock by the poller goroutine.
//
// It is a slice, not a map, for the lookup of every completion: a poller
// serves few owners (an endpoint, or a few), and a scan of those is a few
// compares where a map lookup hashes the ID (docs/performance.md, "shm
// 64 B latency: the read-to-send span"); a larger table is searched by
// halves.
type ownerTable []ownerEntry

// scanOwners is the largest table find scans instead of halving.
const scanOwners = 8

// find returns the handler of owner id.
func (t ownerTable) find(id uint32) (Handler, bool) {
	if len(t) <= scanOwners {
		for i := range t {
			if t[i].id == id {
				return t[i].h, true
			}
		}
		return nil, false
	}
	if i, ok := t.index(id); ok {
		return t[i].h, true
	}
	return nil, false
}

// index returns the position of owner id.
func (t ownerTable) index(id uint32) (int, bool) {
	return slices.BinarySearchFunc(t, id, func(e ownerEntry, id uint32) int { return cmp.Compare(e.id, id) })
}

// Owners returns the number of registered handlers.
func (p *Poller) Owners() int { return len(*p.owners.Load()) }
