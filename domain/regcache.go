package domain

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/stats"
)

// RegistrationCache lends memory registrations for user memory (zero-copy
// sends) and keeps them registered after use, so that sending from the same
// memory again costs no registration. It follows the GNIX registration cache:
// entries ordered by address, a request inside a cached registration reuses
// it, optional merging of overlapping and adjacent requests, lazy
// deregistration of stale entries in LRU order under a stale limit and a
// hard limit, Flush, and hit/miss counters.
//
// Unlike GNIX it has a lock-free fast path: the most recently acquired entry
// is "hot", and acquiring a range inside it or releasing it is one
// compare-and-swap on the entry's state word, because on providers without
// pinning (tcp) a registration costs little more than a system call's
// bookkeeping, and a cache that takes a mutex and walks a tree on every
// hit would not be worth having there (docs/performance.md).
//
// Registration happens under the cache's lock, so that the limit check, the
// merge and the insertion are one step; deregistration never does: retired
// entries are collected under the lock and closed after it is released.
//
// The cache cannot see memory being freed: call Invalidate before unmapping
// or freeing memory that may be cached, or a later allocation at the same
// address would reuse a registration of the old memory.
//
// A RegistrationCache is safe for concurrent use.
type RegistrationCache struct {
	// hot is the entry the fast path serves; written only under mu. It and
	// hits live on their own cache lines: every fast-path hit writes hits,
	// and that must not evict hot (or mu) from other cores' caches.
	hot  atomic.Pointer[CachedRegistration]
	_    [56]byte
	hits atomic.Uint64
	_    [56]byte

	m        *Manager
	access   Access
	max      int // hard limit on alive entries; 0: none
	staleMax int // stale entries kept; 0: none
	merge    bool

	mu      sync.Mutex
	closed  bool
	tree    *btree.BTreeG[item] // entries that serve lookups
	lruHead *CachedRegistration // most recently released stale entry
	lruTail *CachedRegistration // least recently released stale entry
	// The counts below change under mu and are atomics only so that
	// Stats and snapshots read them without it.
	lruLen    atomic.Int64 // listed stale entries (a parked hot entry is not listed)
	alive     atomic.Int64 // entries still registered by the cache: in tree or invalidated/merged but in use
	maxLen    uintptr      // longest registration ever inserted: bounds tree scans
	seq       uint64       // orders entries with the same range
	entry     *stats.Entry // the cache in its manager's stats.Registry
	misses    atomic.Uint64
	merges    atomic.Uint64
	evictions atomic.Uint64
}

// The state word of an entry. The low bits count users; the flags above
// them say who may change it without the lock. Only the hot entry is
// changed without the lock (and only while stHot is set, which every fast
// path CAS checks), so a stale pointer to a former hot entry can never act
// on it: correctness never depends on the fast path.
const (
	stUsers   = 1<<32 - 1 // users holding the entry
	stHot     = 1 << 32   // the entry is c.hot: the fast path may change the users
	stParkOK  = 1 << 33   // the fast path may release the last user (the stale limit has room)
	stDoomed  = 1 << 34   // removed from the tree (merged or invalidated): deregister at the last release
	stRetired = 1 << 35   // deregistered or about to be: never usable again
)

// CachedRegistration is one entry of a RegistrationCache, lent by Acquire
// until Release. Its descriptor and key stay valid until it is released.
type CachedRegistration struct {
	state atomic.Uint64

	// Immutable after creation (published to the fast path through c.hot).
	addr, end uintptr
	desc      uintptr
	key       uint64
	seq       uint64
	c         *RegistrationCache
	reg       *Registration

	// LRU links, guarded by c.mu.
	prev, next *CachedRegistration
	listed     bool
}

// Desc returns the descriptor to pass with operations on this memory.
func (r *CachedRegistration) Desc() uintptr { return r.desc }

// Key returns the key a peer uses for remote access.
func (r *CachedRegistration) Key() uint64 { return r.key }

// Addr returns the start of the registered range, which may begin before
// the range that was acquired.
func (r *CachedRegistration) Addr() uintptr { return r.addr }

// Len returns the length of the registered range in bytes, which may exceed
// the range that was acquired.
func (r *CachedRegistration) Len() int { return int(r.end - r.addr) }

// knownAccess is every access flag a registration may ask for.
const knownAccess = AccessSend | AccessRecv | AccessRead | AccessWrite | AccessRemoteRead | AccessRemoteWrite

// NewRegistrationCache creates a registration cache on m. Its registrations
// go through m.Register, so the domain's limits and accounting cover them
// like any other registration. Close it before closing m. A nil or closed
// Manager, a negative limit or unknown access bits are refused with an
// error (matching netio.ErrInvalidArgument, or netio.ErrClosed).
func (m *Manager) NewRegistrationCache(cfg CacheConfig) (*RegistrationCache, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: registration cache: nil Manager", netio.ErrInvalidArgument)
	}
	if cfg.MaxRegistrations < 0 {
		return nil, fmt.Errorf("%w: registration cache: negative MaxRegistrations %d", netio.ErrInvalidArgument, cfg.MaxRegistrations)
	}
	if cfg.Access&^knownAccess != 0 {
		return nil, fmt.Errorf("%w: registration cache: unknown access bits %#x", netio.ErrInvalidArgument, uint64(cfg.Access&^knownAccess))
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("registration cache: %w", netio.ErrClosed)
	}
	if cfg.Access == 0 {
		cfg.Access = AccessSend
	}
	c := &RegistrationCache{
		m:        m,
		access:   cfg.Access,
		max:      cfg.MaxRegistrations,
		staleMax: cfg.StaleLimit,
		merge:    cfg.Merge,
		tree:     btree.NewG[item](16, itemLess),
	}
	switch {
	case cfg.StaleLimit == 0:
		c.staleMax = DefaultStaleLimit
	case cfg.StaleLimit < 0:
		c.staleMax = 0
	}
	c.entry = m.reg.AddCache(c.fillStats)
	return c, nil
}

// Domain returns the Manager the cache registers in.
func (c *RegistrationCache) Domain() *Manager { return c.m }

// Close deregisters every stale entry and makes later Acquires fail with
// netio.ErrClosed. While entries are in use it changes nothing and returns
// an error wrapping ErrRegistrationsAlive: release them first. It is
// idempotent once it has succeeded.
func (c *RegistrationCache) Close() error {
	var v victims
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.freezeLocked()
	if inUse := int(c.alive.Load() - c.lruLen.Load()); inUse > 0 {
		c.thawLocked()
		c.mu.Unlock()
		return fmt.Errorf("%w: registration cache: %d entries in use: release them first", ErrRegistrationsAlive, inUse)
	}
	for c.lruTail != nil {
		c.retireLocked(c.lruTail, &v)
	}
	c.closed = true
	c.tree.Clear(false)
	c.mu.Unlock()
	c.entry.Remove(nil)
	return v.close()
}
