package pubsub

// A subscriber's receive state by tag, as its poller goroutine finds and
// counts it: a cache in front of the tags' map, and the counters of a
// buffer's messages brought up to date once per buffer.

// tagCacheBits is the number of bits of a slot of a Subscriber's tag
// cache; it holds tagCacheSize entries: a buffer that interleaves up to
// about this many tags (links a publisher coalesces for one subscriber)
// finds each in the cache, not in the map.
const (
	tagCacheBits = 8
	tagCacheSize = 1 << tagCacheBits
)

// tagCacheEntry is a tag's receive state and the version of the tags it
// was found in; it answers for that version only.
type tagCacheEntry struct {
	rt  *recvTag
	ver uint64
}

// tagSlot is tag's entry in the cache: Fibonacci hashing, so that tags
// that differ in their high bits only (fields of a link's ID) spread too.
func tagSlot(tag uint64) uint64 {
	return (tag * 0x9E3779B97F4A7C15) >> (64 - tagCacheBits) // the product's top bits
}

// lookup returns the receive state of tag, or nil, and the version of the
// tags it was found in, through the cache (a tag not subscribed is looked
// up in the map every time).
func (s *Subscriber) lookup(tag uint64) (*recvTag, uint64) {
	v := s.tagsVer.Load()
	e := &s.tagCache[tagSlot(tag)]
	if rt := e.rt; rt != nil && rt.tag == tag && e.ver == v {
		return rt, v
	}
	rt := (*s.tags.Load())[tag]
	if rt != nil {
		*e = tagCacheEntry{rt: rt, ver: v}
	}
	return rt, v
}

// flushCounts brings the counters of the tags whose messages were counted
// in plain fields (start lists them) up to date: TagStats and Stats see a
// buffer's messages once the buffer is done.
func (s *Subscriber) flushCounts() {
	var msgs, bytes uint64
	for i, rt := range s.dirty {
		s.dirty[i] = nil
		rt.dirty = false
		rt.expect.Store(rt.next)
		if rt.pendMsgs != 0 {
			rt.messages.Add(rt.pendMsgs)
			rt.bytes.Add(rt.pendBytes)
			msgs, bytes = msgs+rt.pendMsgs, bytes+rt.pendBytes
			rt.pendMsgs, rt.pendBytes = 0, 0
		}
	}
	s.dirty = s.dirty[:0]
	if msgs != 0 {
		s.st.messages.Add(msgs)
		s.st.bytes.Add(bytes)
	}
}
