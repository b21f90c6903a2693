package domain

import "github.com/netio-go/netio/stats"

// CacheStats is a snapshot of a RegistrationCache's counters.
type CacheStats struct {
	Hits      uint64 // Acquire calls served by an existing registration
	Misses    uint64 // Acquire calls that registered memory
	Merges    uint64 // misses that registered a union absorbing other entries
	Evictions uint64 // stale entries deregistered to respect StaleLimit, MaxRegistrations or the domain's limit
	InUse     int    // entries acquired and not yet released (invalidated ones included until released)
	Stale     int    // entries kept registered for reuse with no user
}

// Stats returns a snapshot of the cache's counters. It reads atomics and
// takes no lock, so it never waits for an Acquire; a snapshot taken while
// entries change may be off by the change in progress.
func (c *RegistrationCache) Stats() CacheStats {
	alive, stale := c.alive.Load(), c.lruLen.Load()
	if e := c.hot.Load(); e != nil && e.state.Load()&stUsers == 0 {
		stale++ // parked by the fast path
	}
	return CacheStats{
		Hits:      c.hits.Load(),
		Misses:    c.misses.Load(),
		Merges:    c.merges.Load(),
		Evictions: c.evictions.Load(),
		InUse:     int(max(alive-stale, 0)),
		Stale:     int(stale),
	}
}

// fillStats is the cache's record in its manager's stats.Registry.
func (c *RegistrationCache) fillStats(s *stats.Cache) {
	st := c.Stats()
	s.Hits, s.Misses, s.Merges, s.Evictions, s.InUse, s.Stale = st.Hits, st.Misses, st.Merges, st.Evictions, st.InUse, st.Stale
}
