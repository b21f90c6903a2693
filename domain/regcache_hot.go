package domain

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
	if e == nil || int(c.lruLen.Load()) >= c.staleMax {
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
