package domain

// CacheStats is a snapshot of a RegistrationCache's counters.
type CacheStats struct {
	Hits      uint64 // Acquire calls served by an existing registration
	Misses    uint64 // Acquire calls that registered memory
	Merges    uint64 // misses that registered a union absorbing other entries
	Evictions uint64 // stale entries deregistered to respect StaleLimit, MaxRegistrations or the domain's limit
	InUse     int    // entries acquired and not yet released (invalidated ones included until released)
	Stale     int    // entries kept registered for reuse with no user
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
