// Package slots is the slot set behind send buffers, header slots and
// receive buffers: a fixed number of equal slots of registered memory
// (Memory: cut from one region, or leased from a pool.Pool), a free stack,
// the fewest free slots since the last look (netio3's
// get_num_available_buffers), and the state of every slot (Set).
//
// A slot has one owner at a time, and its state says which: the set
// (free), a holder that took it (leased), or the provider (posted). Every
// transition is a compare-and-swap checked against the holder, so a slot
// is never released or completed twice, nor by someone who does not hold
// it: a second completion of the same operation, a release of a buffer in
// flight, or another endpoint's ID changes nothing and says so.
package slots

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio"
)

// Slot states, in the low bits of a slot's word; the holder is in the rest.
const (
	free uint64 = iota
	leased
	posted

	stateBits = 2
	stateMask = 1<<stateBits - 1
	// MaxHolder is the largest holder a Set takes.
	MaxHolder = 1<<(64-stateBits) - 1
)

// SoleHolder is the holder of a set that has one owner: a HeaderBuffer
// takes and returns all its slots as it.
const SoleHolder = 1

// slot is one slot's state and holder in one word (so that a transition
// is one compare-and-swap checked against the holder), and the caller's
// key for the operation using it.
//
// The key is a plain field: it is written by whoever holds the slot alone
// (under the set's lock in take, or before MarkPosted's compare-and-swap
// publishes it) and read after a compare-and-swap that took the slot
// (Claim, Complete) or under the lock (Key), so every read happens after
// the write it reads. An atomic key cost a locked instruction per send.
//
// A slot fills a cache line: slots in flight at once are taken and
// completed by different goroutines (callers and the poller), and slots
// sharing a line would make each one's compare-and-swap miss the others'.
type slot struct {
	word atomic.Uint64 // holder<<stateBits | state; 0 while free
	key  uint64
	_    [cacheLine - 16]byte
}

// cacheLine is the size of a cache line on the machines netio-go runs on.
const cacheLine = 64

// word packs a holder and a state.
func word(holder, state uint64) uint64 { return holder<<stateBits | state }

// Set is the state of n slots, numbered 0..n-1, and the stack of free ones.
// It is safe for concurrent use and does not allocate after New.
type Set struct {
	slots []slot

	mu      sync.Mutex
	free    []uint32 // stack of free slots, low numbers on top at first
	minFree int      // fewest free since the last NumAvailable
	// readMin is the fewest free since the last ReadFree (noMin before
	// the first): written under mu, read without it by snapshots.
	readMin atomic.Int64
	closed  bool
	// shut is set while Close decides: MarkPosted, which does not lock,
	// backs out when it sees it, and Close refuses when it sees a slot
	// posted, so a slot is never posted on a closed set.
	shut atomic.Bool
	// attached counts the users of a shared set (Attach).
	attached int

	// afterClose, when set, takes a slot that became free after Close
	// instead of the free stack (sendbuf hands a lease back this way).
	afterClose func(id uint32)
}

// NewSet returns a set of n free slots.
func NewSet(n int) *Set {
	s := &Set{slots: make([]slot, n), free: make([]uint32, n), minFree: n}
	s.readMin.Store(noMin)
	for i := range n {
		s.free[n-1-i] = uint32(i) // hand out low numbers first
	}
	return s
}

// Len returns the number of slots.
func (s *Set) Len() int { return len(s.slots) }

// Take leases a free slot to holder (1..MaxHolder) and reports false when
// none is free, the set is closed or holder is out of range. Only a
// successful Take moves the fewest-free count: with none free it is 0
// already.
func (s *Set) Take(holder uint64) (id uint32, ok bool) {
	return s.take(holder, leased, 0)
}

// TakePosted takes a free slot for holder straight into posted with key:
// Take and MarkPosted in one, for an owner that posts every slot it takes
// (a HeaderBuffer).
func (s *Set) TakePosted(holder, key uint64) (id uint32, ok bool) {
	return s.take(holder, posted, key)
}

func (s *Set) take(holder, state, key uint64) (id uint32, ok bool) {
	if holder == 0 || holder > MaxHolder {
		return 0, false
	}
	s.mu.Lock()
	n := len(s.free)
	if n == 0 || s.closed {
		s.mu.Unlock()
		return 0, false
	}
	id = s.free[n-1]
	s.free = s.free[:n-1]
	s.minFree = min(s.minFree, n-1)
	if v := int64(n - 1); v < s.readMin.Load() { // a load while the minimum holds
		s.readMin.Store(v)
	}
	sl := &s.slots[id]
	if state == posted {
		sl.key = key
	}
	// Under the lock: Close, which decides under it, must never see a slot
	// that left the free stack as free, or it would let the memory go
	// while the taker writes into it.
	sl.word.Store(word(holder, state))
	s.mu.Unlock()
	return id, true
}

// get returns slot id, or nil when out of range.
func (s *Set) get(id uint32) *slot {
	if uint64(id) >= uint64(len(s.slots)) {
		return nil
	}
	return &s.slots[id]
}

// transition moves slot id from one state to another if holder holds it.
func (s *Set) transition(id uint32, holder, from, to uint64) bool {
	sl := s.get(id)
	return sl != nil && holder != 0 && holder <= MaxHolder && sl.word.CompareAndSwap(word(holder, from), word(holder, to))
}

// Release returns a slot holder leased and did not post. It reports false,
// changing nothing, for an unknown slot or one holder does not lease
// (free, posted, or someone else's).
func (s *Set) Release(id uint32, holder uint64) bool {
	sl := s.get(id)
	if sl == nil || holder == 0 || holder > MaxHolder || !sl.word.CompareAndSwap(word(holder, leased), free) {
		return false
	}
	s.putBack(id)
	return true
}

// MarkPosted moves a slot holder leased to posted, with the key to report
// for it. It fails, changing nothing, when holder does not lease it.
func (s *Set) MarkPosted(id uint32, holder, key uint64) bool {
	sl := s.get(id)
	if sl == nil || holder == 0 || holder > MaxHolder || sl.word.Load() != word(holder, leased) {
		return false
	}
	// Before the state, so that whoever claims the slot sees the key. Two
	// posts of one slot at once are a caller's bug that the state's
	// compare-and-swap refuses for one of them, but both may have written
	// the key: the race detector reports that misuse. A send buffer's key
	// is its ID, so after its first post nothing is written at all.
	if sl.key != key {
		sl.key = key
	}
	if !sl.word.CompareAndSwap(word(holder, leased), word(holder, posted)) {
		return false
	}
	if s.shut.Load() { // Close has begun: back out
		sl.word.CompareAndSwap(word(holder, posted), word(holder, leased))
		return false
	}
	return true
}

// Unpost moves a posted slot back to leased, for a post the provider
// refused. A slot not posted by holder is left alone.
func (s *Set) Unpost(id uint32, holder uint64) { s.transition(id, holder, posted, leased) }

// Claim takes a posted slot back from the provider for holder, once: the
// first Claim of a posted slot reports true and its key, every later one
// false. The slot is leased again, so that the claimer can let go of what
// the operation held before it calls Release.
func (s *Set) Claim(id uint32, holder uint64) (key uint64, ok bool) {
	if !s.transition(id, holder, posted, leased) {
		return 0, false
	}
	return s.slots[id].key, true
}

// Complete is Claim then Release in one compare-and-swap: a posted slot
// goes back to the free stack once, and its key is reported.
func (s *Set) Complete(id uint32, holder uint64) (key uint64, ok bool) {
	sl := s.get(id)
	if sl == nil || holder == 0 || holder > MaxHolder {
		return 0, false
	}
	if !sl.word.CompareAndSwap(word(holder, posted), free) {
		return 0, false
	}
	key = sl.key // free now, but not on the stack: nobody can retake it yet
	s.putBack(id)
	return key, true
}

// Posted appends the slots holder has posted to dst.
func (s *Set) Posted(dst []uint32, holder uint64) []uint32 {
	for i := range s.slots {
		sl := &s.slots[i]
		if holder != 0 && sl.word.Load() == word(holder, posted) {
			dst = append(dst, uint32(i))
		}
	}
	return dst
}

// PostedMarked is Posted with mark or-ed into each slot appended, for an
// owner that keeps several sets in one table of keys.
func (s *Set) PostedMarked(dst []uint32, holder uint64, mark uint32) []uint32 {
	start := len(dst)
	dst = s.Posted(dst, holder)
	for i := start; i < len(dst); i++ {
		dst[i] |= mark
	}
	return dst
}

// Key returns the key slot id was posted with (stale once it is free). It
// reads under the lock, so it is safe beside TakePosted, which writes under
// it; beside a MarkPosted of the same slot, which does not lock, only
// Claim and Complete read the key.
func (s *Set) Key(id uint32) uint64 {
	sl := s.get(id)
	if sl == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sl.key
}

// Reclaim releases every slot holder leased and did not post, for a holder
// that is closing, and returns how many.
func (s *Set) Reclaim(holder uint64) int {
	n := 0
	for i := range s.slots {
		if s.Release(uint32(i), holder) {
			n++
		}
	}
	return n
}

// putBack clears the holder of a slot just made free and pushes it.
func (s *Set) putBack(id uint32) {
	s.mu.Lock()
	if s.closed && s.afterClose != nil {
		s.mu.Unlock()
		s.afterClose(id)
		return
	}
	s.free = append(s.free, id)
	s.mu.Unlock()
}

// NumAvailable returns the fewest free slots seen since the previous call,
// and starts a new interval at the number free now.
func (s *Set) NumAvailable() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.minFree
	s.minFree = len(s.free)
	return n
}

// Free returns the number of free slots now.
func (s *Set) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}

// noMin is readMin before the first ReadFree.
const noMin = math.MaxInt64

// ReadFree returns the number of free slots now and the fewest free since
// the previous ReadFree, for snapshots (package stats): it takes no lock,
// so it never delays a Take, and its interval is its own, apart from
// NumAvailable's. A slot being taken or given back as it reads may be
// counted on either side.
func (s *Set) ReadFree() (free, minFree int) {
	nLeased, nPosted := s.Count()
	free = len(s.slots) - nLeased - nPosted
	m := s.readMin.Swap(int64(free)) // the next interval starts here
	return free, int(min(m, int64(free)))
}

// Count reports how many slots are leased and how many posted now.
func (s *Set) Count() (nLeased, nPosted int) {
	for i := range s.slots {
		switch s.slots[i].word.Load() & stateMask {
		case leased:
			nLeased++
		case posted:
			nPosted++
		}
	}
	return nLeased, nPosted
}

// Leased reports whether slot id is leased (to anyone).
func (s *Set) Leased(id uint32) bool {
	sl := s.get(id)
	return sl != nil && sl.word.Load()&stateMask == leased
}

// Close refuses further Takes and Attaches, once no slot is posted and no
// user is attached; otherwise it returns an error wrapping
// netio.ErrNoResources and changes nothing (the provider may still use a
// slot). Slots freed later go to afterClose when it was set with
// OnFreeAfterClose. Closing twice returns nil.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.attached > 0 {
		return fmt.Errorf("%w: %d endpoints still use the buffers", netio.ErrNoResources, s.attached)
	}
	s.shut.Store(true) // before the check: see MarkPosted
	for i := range s.slots {
		if s.slots[i].word.Load()&stateMask == posted {
			s.shut.Store(false)
			return fmt.Errorf("%w: slot %d still posted", netio.ErrNoResources, i)
		}
	}
	s.closed = true
	return nil
}

// Closed reports whether Close succeeded.
func (s *Set) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// OnFreeAfterClose makes slots freed after Close go to fn instead of the
// free stack. Call it before the set is shared.
func (s *Set) OnFreeAfterClose(fn func(id uint32)) { s.afterClose = fn }

// Attach records one more user of a shared set (an endpoint drawing on a
// sendbuf.SendBufferManager); Close refuses while any is attached. It
// fails once the set is closed.
func (s *Set) Attach() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.attached++
	return true
}

// Detach records that a user stopped using the set.
func (s *Set) Detach() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attached > 0 {
		s.attached--
	}
}

// Attached returns the number of attached users.
func (s *Set) Attached() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attached
}

// Holder returns the holder of slot id, 0 while it is free.
func (s *Set) Holder(id uint32) uint64 {
	if sl := s.get(id); sl != nil {
		return sl.word.Load() >> stateBits
	}
	return 0
}
