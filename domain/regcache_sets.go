package domain

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
	c.lruLen.Add(1)
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
	c.lruLen.Add(-1)
}
