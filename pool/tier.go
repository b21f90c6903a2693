package pool

import (
	"math"
	"sync"
	"sync/atomic"
)

// tier holds the buffers of one size.
type tier struct {
	p    *Pool
	size int
	base int // buffers registered by New; never shrunk

	mu      sync.Mutex
	free    []*slot // free configured buffers (stack: hot ones on top)
	extra   []*slot // free extra buffers, oldest first, taken from the top
	count   int     // registered buffers, free and leased
	minFree int     // fewest free since the previous Stats
	// The same counts for snapshots (package stats), which read them
	// without t.mu: written by publish under it.
	nFree, nCount, readMin atomic.Int64
	_                      [cacheLine]byte
}

// noMin is readMin before the first readFree.
const noMin = math.MaxInt64

// publish makes the counts readable without t.mu. Call with t.mu held,
// after a change.
func (t *tier) publish() {
	f := int64(len(t.free) + len(t.extra))
	t.nFree.Store(f)
	if c := int64(t.count); c != t.nCount.Load() { // rarely: a grow or a shrink
		t.nCount.Store(c)
	}
	if f < t.readMin.Load() {
		t.readMin.Store(f)
	}
}

// readFree returns the buffers registered and free now and the fewest
// free since the previous readFree, without t.mu.
func (t *tier) readFree() (count, free, minFree int) {
	f := t.nFree.Load()
	m := min(t.readMin.Swap(f), f) // the next interval starts here
	return int(t.nCount.Load()), int(f), int(m)
}

// pop takes a free buffer, configured ones first so that extra buffers sit
// idle and can be shrunk. Call with t.mu held.
func (t *tier) pop() *slot {
	var s *slot
	if n := len(t.free); n > 0 {
		s = t.free[n-1]
		t.free = t.free[:n-1]
	} else if n := len(t.extra); n > 0 {
		s = t.extra[n-1]
		t.extra = t.extra[:n-1]
	} else {
		t.minFree = 0
		t.readMin.Store(0)
		return nil
	}
	if f := len(t.free) + len(t.extra); f < t.minFree {
		t.minFree = f
	}
	t.publish()
	return s
}

// put returns a buffer whose last handle was released: to a waiter that
// fits, to the free list, or, after Close, to the allocator.
func (t *tier) put(s *slot) {
	p := t.p
	t.mu.Lock()
	if p.closed.Load() {
		// Close has swept (or will not look at) the free list: this lease
		// was the buffer's last user.
		t.count--
		t.publish()
		t.mu.Unlock()
		p.destroy(s)
		return
	}
	s.freedAt = p.epoch.Load()
	if s.extra {
		t.extra = append(t.extra, s)
	} else {
		t.free = append(t.free, s)
	}
	// Read under t.mu: a waiter counts itself before it looks at the free
	// lists (under t.mu), so either it sees this buffer or we see it.
	waiting := p.nwait.Load() != 0
	t.publish()
	t.mu.Unlock()
	if waiting {
		p.handoff(t)
	}
}

// fitting returns the index of the smallest tier of at least minSize, or
// len(ts) when none fits.
func fitting(ts []*tier, minSize int) int {
	for i, t := range ts {
		if t.size >= minSize {
			return i
		}
	}
	return len(ts)
}
