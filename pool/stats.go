package pool

import "github.com/netio-go/netio/stats"

// TierStats describes one tier.
type TierStats struct {
	Size    int // buffer size in bytes
	Count   int // registered buffers, free and leased
	Base    int // buffers registered by New (never shrunk)
	Free    int // free buffers now
	InUse   int // leased buffers now
	MinFree int // fewest free buffers since the previous Stats call
}

// Stats is a snapshot of a pool.
type Stats struct {
	Tiers           []TierStats // smallest first
	RegisteredBytes int64       // bytes registered now (sum of buffer sizes)
	PeakBytes       int64       // high-water mark of RegisteredBytes
	MappedBytes     int64       // bytes mapped from the Allocator now (page-rounded)
	Budget          int64       // cap on RegisteredBytes (0: none)
	Waiters         int         // Gets queued waiting for a buffer
	Closed          bool        // the pool is closed
}

// InUse returns the number of leased buffers, over every tier.
func (s Stats) InUse() int {
	n := 0
	for _, t := range s.Tiers {
		n += t.InUse
	}
	return n
}

// Stats returns a snapshot of the pool and starts a new interval for
// TierStats.MinFree (netio3's minimum-available count).
func (p *Pool) Stats() Stats {
	ts := *p.tiers.Load()
	st := Stats{Tiers: make([]TierStats, len(ts)), Budget: p.budget, Closed: p.closed.Load()}
	for i, t := range ts {
		t.mu.Lock()
		f := len(t.free) + len(t.extra)
		st.Tiers[i] = TierStats{Size: t.size, Count: t.count, Base: t.base, Free: f, InUse: t.count - f, MinFree: t.minFree}
		t.minFree = f
		t.mu.Unlock()
	}
	p.growMu.Lock()
	st.PeakBytes = p.peak.Load()
	p.growMu.Unlock()
	st.RegisteredBytes = p.registered.Load()
	st.MappedBytes = p.mapped.Load()
	p.waitMu.Lock()
	st.Waiters = len(p.waiters) // queued, not merely counted
	p.waitMu.Unlock()
	return st
}

// fillStats is the pool's record in its manager's stats.Registry. Unlike
// Stats it takes no lock a Get or a release takes, and its minimum free is
// an interval of its own.
func (p *Pool) fillStats(s *stats.Pool) {
	ts := *p.tiers.Load()
	s.Tiers = make([]stats.Tier, len(ts))
	for i, t := range ts {
		count, free, minFree := t.readFree()
		s.Tiers[i] = stats.Tier{Size: t.size, Count: count, Free: free, MinFree: minFree}
	}
	s.RegisteredBytes, s.PeakBytes, s.Budget = p.registered.Load(), p.peak.Load(), p.budget
	s.Waiters = int(p.nwait.Load())
}
