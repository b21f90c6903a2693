package domain

import (
	"errors"
	"fmt"
)

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
	c.alive.Add(-1)
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
	c.evictions.Add(1)
	return true
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
