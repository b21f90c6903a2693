package domain

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
)

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
	if inUse := int(c.alive.Load() - c.lruLen.Load()); c.max > 0 && inUse+1 > c.max {
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
		c.merges.Add(1)
		for _, e := range covered {
			c.removeLocked(e, v)
		}
	}
	c.seq++
	e := &CachedRegistration{addr: lo, end: hi, desc: reg.Desc(), key: reg.Key(), seq: c.seq, c: c, reg: reg}
	e.state.Store(1)
	c.tree.ReplaceOrInsert(e.item())
	c.alive.Add(1)
	c.misses.Add(1)
	c.maxLen = max(c.maxLen, hi-lo)
	for c.max > 0 && int(c.alive.Load()) > c.max && c.evictLocked(v) {
	}
	c.setHotLocked(e)
	return e, false, nil
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
			c.alive.Add(-1)
			v.add(r)
		} else {
			c.listLocked(r)
			for int(c.lruLen.Load()) > c.staleMax && c.evictLocked(&v) {
			}
		}
	}
	c.thawLocked()
	c.mu.Unlock()
	c.closeLogged(&v)
}
