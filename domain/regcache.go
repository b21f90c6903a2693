package domain

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/netio-go/netio"
)

// DefaultStaleLimit is the number of stale registrations a cache keeps for
// reuse when CacheConfig.StaleLimit is 0 (the GNIX default).
const DefaultStaleLimit = 128

// CacheConfig configures a RegistrationCache.
type CacheConfig struct {
	// Access is the access of the cache's registrations; 0 selects
	// AccessSend, which is what zero-copy sends need and no more.
	Access Access
	// MaxRegistrations is a hard limit on the cache's registrations, stale
	// ones included. 0 leaves only the domain's own limit.
	MaxRegistrations int
	// StaleLimit is the number of stale (unused) registrations kept for
	// reuse. 0 selects DefaultStaleLimit; a negative value keeps none, so
	// every registration is deregistered at its last release.
	StaleLimit int
	// Merge makes a miss that overlaps or is adjacent to cached
	// registrations register the union of the ranges instead, so that later
	// requests anywhere in it hit. Without it, overlapping registrations
	// simply coexist.
	Merge bool
}

// CacheStats is a snapshot of a RegistrationCache's counters.
type CacheStats struct {
	Hits      uint64 // Acquire calls served by an existing registration
	Misses    uint64 // Acquire calls that registered memory
	Merges    uint64 // misses that registered a union absorbing other entries
	Evictions uint64 // stale entries deregistered to respect StaleLimit, MaxRegistrations or the domain's limit
	InUse     int    // entries acquired and not yet released (invalidated ones included until released)
	Stale     int    // entries kept registered for reuse with no user
}

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
// pinning (tcp) a registration costs only ≈100 ns, and a cache that takes a
// mutex and walks a tree on every hit would not be worth having there.
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

	mu        sync.Mutex
	closed    bool
	tree      *btree.BTreeG[item] // entries that serve lookups
	lruHead   *CachedRegistration // most recently released stale entry
	lruTail   *CachedRegistration // least recently released stale entry
	lruLen    int                 // listed stale entries (a parked hot entry is not listed)
	alive     int                 // entries still registered by the cache: in tree or invalidated/merged but in use
	maxLen    uintptr             // longest registration ever inserted: bounds tree scans
	seq       uint64              // orders entries with the same range
	misses    uint64
	merges    uint64
	evictions uint64
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

// item is the tree's element: the range is copied in so that comparisons
// do not chase the pointer.
type item struct {
	addr, end uintptr
	seq       uint64
	e         *CachedRegistration
}

func itemLess(a, b item) bool {
	if a.addr != b.addr {
		return a.addr < b.addr
	}
	if a.end != b.end {
		return a.end < b.end
	}
	return a.seq < b.seq
}

func (e *CachedRegistration) item() item { return item{addr: e.addr, end: e.end, seq: e.seq, e: e} }

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
	return c, nil
}

// Acquire returns a registration covering length bytes at addr, registering
// them if no cached registration contains the range. The memory must stay
// mapped until the entry is released and, if it is to be freed afterwards,
// invalidated. Hand the entry back with Release exactly once.
//
// When the hard limit is reached and every entry is in use, Acquire fails
// with an error wrapping netio.ErrNoResources and changes nothing. After
// Close it fails with netio.ErrClosed.
func (c *RegistrationCache) Acquire(addr uintptr, length int) (*CachedRegistration, error) {
	end := addr + uintptr(length)
	// Fast path: the hot entry contains the range and is not being retired.
	// addr >= e.addr rules out addr 0; length and overflow are checked
	// after the range test, which is what usually decides.
	if e := c.hot.Load(); e != nil && addr >= e.addr && end <= e.end && length > 0 && end > addr {
		for s := e.state.Load(); s&stHot != 0 && s&stUsers != stUsers; s = e.state.Load() {
			if e.state.CompareAndSwap(s, s+1) {
				c.hits.Add(1)
				return e, nil
			}
		}
	}
	return c.acquireSlow(addr, length)
}

// Release hands back an entry from Acquire. At its last release the entry
// becomes stale (kept for reuse, most recent in LRU order) or, if it was
// invalidated or merged meanwhile, is deregistered. Releasing nil, an entry
// of another cache, or an entry with no user left is ignored: a user count
// never goes below zero.
func (c *RegistrationCache) Release(r *CachedRegistration) {
	if r == nil || r.c != c {
		return
	}
	// Fast path: the hot entry, and either other users remain or the stale
	// limit has room for it to park as the most recent stale entry.
	for s := r.state.Load(); s&stHot != 0; s = r.state.Load() {
		n := s & stUsers
		if n == 0 || (n == 1 && s&stParkOK == 0) {
			break
		}
		if r.state.CompareAndSwap(s, s-1) {
			return
		}
	}
	c.releaseSlow(r)
}

// victims collects entries retired under the lock, to be deregistered after
// it is released: deregistration can be slow on RDMA providers and must not
// stall other users of the cache. A nil list costs no allocation, so paths
// that retire nothing (every hit) allocate nothing.
type victims []*CachedRegistration

func (v *victims) add(e *CachedRegistration) { *v = append(*v, e) }

// close deregisters the victims; call it without the lock.
func (v *victims) close() error {
	var errs []error
	for i, e := range *v {
		if err := e.reg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("registration cache: deregister %d bytes at %#x: %w", e.end-e.addr, e.addr, err))
		}
		(*v)[i] = nil
	}
	*v = (*v)[:0]
	return errors.Join(errs...)
}

// closeLogged deregisters the victims where no caller can receive an error.
func (c *RegistrationCache) closeLogged(v *victims) {
	if err := v.close(); err != nil {
		c.m.log.Warn().Err(err).Msg("registration cache: deregistration failed")
	}
}

func (c *RegistrationCache) acquireSlow(addr uintptr, length int) (*CachedRegistration, error) {
	end := addr + uintptr(length)
	if addr == 0 || length <= 0 || end < addr {
		return nil, fmt.Errorf("%w: registration cache: acquire %d bytes at %#x", netio.ErrInvalidArgument, length, addr)
	}
	var v victims
	defer c.closeLogged(&v)
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, fmt.Errorf("registration cache: acquire: %w", netio.ErrClosed)
		}
		c.freezeLocked()
		if e := c.findLocked(addr, end); e != nil {
			if e.state.Load()&stUsers == stUsers {
				c.thawLocked()
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: registration cache: %d users of one registration", netio.ErrNoResources, uint64(stUsers))
			}
			if e.listed {
				c.unlistLocked(e)
			}
			c.addUserLocked(e)
			c.setHotLocked(e)
			c.hits.Add(1)
			c.thawLocked()
			c.mu.Unlock()
			return e, nil
		}
		e, domainErr, err := c.missLocked(addr, end, &v)
		if err == nil {
			c.thawLocked()
			c.mu.Unlock()
			return e, nil
		}
		// The domain refused: the stale entries may be what fills its
		// limit, so deregister the least recently used one (outside the
		// lock) and try once more.
		retry := attempt == 0 && domainErr && errors.Is(err, netio.ErrNoResources) && c.evictLocked(&v)
		c.thawLocked()
		c.mu.Unlock()
		if !retry {
			return nil, err
		}
		if cerr := v.close(); cerr != nil {
			c.m.log.Warn().Err(cerr).Msg("registration cache: deregistration failed")
		}
	}
}

// missLocked registers [addr, end) (or, with Merge, the union with the
// entries it overlaps or touches) and inserts it in use. On error nothing
// has changed; domainErr says the Manager refused, rather than the cache's
// own limit.
func (c *RegistrationCache) missLocked(addr, end uintptr, v *victims) (_ *CachedRegistration, domainErr bool, _ error) {
	lo, hi := addr, end
	var covered []*CachedRegistration
	if c.merge {
		lo, hi, covered = c.unionLocked(addr, end)
	}
	// The hard limit counts stale entries, which are evicted LRU-first to
	// make room after the registration (a merge may retire some of them
	// anyway). Refuse first when that cannot work, so that a refused
	// Acquire changes nothing.
	if inUse := c.alive - c.lruLen; c.max > 0 && inUse+1 > c.max {
		return nil, false, fmt.Errorf("%w: registration cache: all %d registrations in use (limit %d)",
			netio.ErrNoResources, inUse, c.max)
	}

	reg, err := c.m.Register(lo, int(hi-lo), c.access)
	if err != nil && len(covered) > 0 {
		// The union could not be registered (a byte limit, or memory of a
		// stale entry that is no longer mapped): merging is an optimisation,
		// so fall back to the request alone.
		lo, hi, covered = addr, end, nil
		reg, err = c.m.Register(lo, int(hi-lo), c.access)
	}
	if err != nil {
		return nil, true, fmt.Errorf("registration cache: %w", err)
	}

	if len(covered) > 0 {
		c.merges++
		for _, e := range covered {
			c.removeLocked(e, v)
		}
	}
	c.seq++
	e := &CachedRegistration{addr: lo, end: hi, desc: reg.Desc(), key: reg.Key(), seq: c.seq, c: c, reg: reg}
	e.state.Store(1)
	c.tree.ReplaceOrInsert(e.item())
	c.alive++
	c.misses++
	c.maxLen = max(c.maxLen, hi-lo)
	for c.max > 0 && c.alive > c.max && c.evictLocked(v) {
	}
	c.setHotLocked(e)
	return e, false, nil
}

// findLocked returns an entry of the tree containing [addr, end), or nil.
func (c *RegistrationCache) findLocked(addr, end uintptr) *CachedRegistration {
	var low uintptr // entries starting below low are too short to reach end
	if end > c.maxLen {
		low = end - c.maxLen
	}
	var found *CachedRegistration
	pivot := item{addr: addr, end: ^uintptr(0), seq: ^uint64(0)}
	c.tree.DescendLessOrEqual(pivot, func(it item) bool {
		if it.addr < low {
			return false
		}
		if it.end >= end {
			found = it.e
			return false
		}
		return true
	})
	return found
}

// overlappingLocked appends to dst the tree's entries that overlap [lo, hi),
// or with adjacent also those that touch it.
func (c *RegistrationCache) overlappingLocked(dst []*CachedRegistration, lo, hi uintptr, adjacent bool) []*CachedRegistration {
	var low uintptr
	if lo > c.maxLen {
		low = lo - c.maxLen
	}
	stop := item{addr: hi}
	if adjacent {
		stop = item{addr: hi + 1} // an entry starting at hi touches the range
	}
	c.tree.AscendRange(item{addr: low}, stop, func(it item) bool {
		if it.end > lo || (adjacent && it.end == lo) {
			dst = append(dst, it.e)
		}
		return true
	})
	return dst
}

// unionLocked grows [lo, hi) over every entry that overlaps or touches it,
// until none is left outside, and returns the entries absorbed.
func (c *RegistrationCache) unionLocked(lo, hi uintptr) (uintptr, uintptr, []*CachedRegistration) {
	var covered []*CachedRegistration
	for {
		covered = c.overlappingLocked(covered[:0], lo, hi, true)
		nlo, nhi := lo, hi
		for _, e := range covered {
			nlo, nhi = min(nlo, e.addr), max(nhi, e.end)
		}
		if nlo == lo && nhi == hi {
			return lo, hi, covered
		}
		lo, hi = nlo, nhi
	}
}

// addUserLocked adds a user to an entry of the tree that is not hot or is
// frozen, so its user count cannot drop to zero meanwhile.
func (c *RegistrationCache) addUserLocked(e *CachedRegistration) {
	for s := e.state.Load(); !e.state.CompareAndSwap(s, s+1); s = e.state.Load() {
	}
}

// freezeLocked stops the fast path from parking the hot entry (releasing
// its last user) while the lock is held, and moves a parked hot entry to
// the LRU list: a parked hot entry is always the most recently released, so
// it goes to the front. Every slow-path operation starts with it, so under
// the lock the hot entry, if any, is in use and stays in use.
func (c *RegistrationCache) freezeLocked() {
	e := c.hot.Load()
	if e == nil {
		return
	}
	for {
		s := e.state.Load()
		if s&stUsers == 0 {
			if e.state.CompareAndSwap(s, 0) {
				c.hot.Store(nil)
				c.listLocked(e)
				return
			}
			continue
		}
		if e.state.CompareAndSwap(s, s&^stParkOK) {
			return
		}
	}
}

// thawLocked lets the fast path park the hot entry again when the stale
// limit has room for one more stale entry. Call it before unlocking.
func (c *RegistrationCache) thawLocked() {
	e := c.hot.Load()
	if e == nil || c.lruLen >= c.staleMax {
		return
	}
	for s := e.state.Load(); !e.state.CompareAndSwap(s, s|stParkOK); s = e.state.Load() {
	}
}

// setHotLocked makes e, in use, the entry of the fast path.
func (c *RegistrationCache) setHotLocked(e *CachedRegistration) {
	old := c.hot.Load()
	if old == e {
		return
	}
	if old != nil {
		c.unhotLocked(old, 0)
	}
	for s := e.state.Load(); !e.state.CompareAndSwap(s, s|stHot); s = e.state.Load() {
	}
	c.hot.Store(e)
}

// unhotLocked takes the (frozen, in use) hot entry off the fast path,
// setting the flags in set.
func (c *RegistrationCache) unhotLocked(e *CachedRegistration, set uint64) {
	for s := e.state.Load(); !e.state.CompareAndSwap(s, s&^(stHot|stParkOK)|set); s = e.state.Load() {
	}
	c.hot.Store(nil)
}

func (c *RegistrationCache) releaseSlow(r *CachedRegistration) {
	var v victims
	c.mu.Lock()
	c.freezeLocked()
	var s, ns uint64
	for {
		s = r.state.Load()
		if s&stUsers == 0 || s&stRetired != 0 {
			c.thawLocked()
			c.mu.Unlock()
			return // not acquired, or released once too often: ignore
		}
		ns = s - 1
		if ns&stUsers == 0 {
			ns &^= stHot | stParkOK
		}
		if r.state.CompareAndSwap(s, ns) {
			break
		}
	}
	if ns&stUsers == 0 {
		if s&stHot != 0 {
			c.hot.Store(nil)
		}
		if ns&stDoomed != 0 {
			r.state.Store(stRetired)
			c.alive--
			v.add(r)
		} else {
			c.listLocked(r)
			for c.lruLen > c.staleMax && c.evictLocked(&v) {
			}
		}
	}
	c.thawLocked()
	c.mu.Unlock()
	c.closeLogged(&v)
}

// Invalidate removes every entry that overlaps length bytes at addr, for
// memory the caller is about to free or unmap: stale entries are
// deregistered now, entries in use when they are released. Later Acquires
// of the range register anew, so memory reallocated at the same address is
// never served by a registration of the old memory. It returns the number
// of entries removed; bad input or a closed cache removes none.
func (c *RegistrationCache) Invalidate(addr uintptr, length int) int {
	end := addr + uintptr(length)
	if addr == 0 || length <= 0 || end < addr {
		return 0
	}
	var v victims
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0
	}
	c.freezeLocked()
	hit := c.overlappingLocked(nil, addr, end, false)
	for _, e := range hit {
		c.removeLocked(e, &v)
	}
	c.thawLocked()
	c.mu.Unlock()
	c.closeLogged(&v)
	return len(hit)
}

// removeLocked takes e out of the tree: a stale entry is retired into v, an
// entry in use is doomed, to be deregistered at its last release.
func (c *RegistrationCache) removeLocked(e *CachedRegistration, v *victims) {
	if e.listed {
		c.retireLocked(e, v)
		return
	}
	c.tree.Delete(e.item())
	if c.hot.Load() == e {
		c.unhotLocked(e, stDoomed)
		return
	}
	for s := e.state.Load(); !e.state.CompareAndSwap(s, s|stDoomed); s = e.state.Load() {
	}
}

// retireLocked retires a listed (stale) entry into v.
func (c *RegistrationCache) retireLocked(e *CachedRegistration, v *victims) {
	c.unlistLocked(e)
	c.tree.Delete(e.item())
	e.state.Store(stRetired)
	c.alive--
	v.add(e)
}

// evictLocked evicts the least recently released stale entry into v; it
// reports false when there is none.
func (c *RegistrationCache) evictLocked(v *victims) bool {
	e := c.lruTail
	if e == nil {
		return false
	}
	c.retireLocked(e, v)
	c.evictions++
	return true
}

// listLocked puts a stale entry at the front (most recent end) of the LRU
// list.
func (c *RegistrationCache) listLocked(e *CachedRegistration) {
	e.prev, e.next, e.listed = nil, c.lruHead, true
	if c.lruHead != nil {
		c.lruHead.prev = e
	} else {
		c.lruTail = e
	}
	c.lruHead = e
	c.lruLen++
}

func (c *RegistrationCache) unlistLocked(e *CachedRegistration) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.lruHead = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.lruTail = e.prev
	}
	e.prev, e.next, e.listed = nil, nil, false
	c.lruLen--
}

// Flush deregisters every stale entry, e.g. to give registrations back to
// the domain for another user. Entries in use are not touched.
func (c *RegistrationCache) Flush() error {
	var v victims
	c.mu.Lock()
	c.freezeLocked()
	for c.lruTail != nil {
		c.retireLocked(c.lruTail, &v)
	}
	c.thawLocked()
	c.mu.Unlock()
	return v.close()
}

// Stats returns a snapshot of the cache's counters.
func (c *RegistrationCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	stale := c.lruLen
	if e := c.hot.Load(); e != nil && e.state.Load()&stUsers == 0 {
		stale++ // parked by the fast path
	}
	return CacheStats{
		Hits:      c.hits.Load(),
		Misses:    c.misses,
		Merges:    c.merges,
		Evictions: c.evictions,
		InUse:     c.alive - stale,
		Stale:     stale,
	}
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
	if inUse := c.alive - c.lruLen; inUse > 0 {
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
	return v.close()
}
