package slots_test

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/headerbuf"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/sendbuf"
)

// Holders used below; any non-zero numbers do.
const (
	alice uint64 = 1
	bob   uint64 = 2
)

// take leases a slot to holder and fails the test when none is handed out.
func take(t *testing.T, s *slots.Set, holder uint64) uint32 {
	t.Helper()
	id, ok := s.Take(holder)
	require.True(t, ok, "Take(%d)", holder)
	return id
}

// takePosted leases a slot to holder and posts it with key.
func takePosted(t *testing.T, s *slots.Set, holder, key uint64) uint32 {
	t.Helper()
	id := take(t, s, holder)
	require.True(t, s.MarkPosted(id, holder, key), "MarkPosted(%d, %d, %d)", id, holder, key)
	return id
}

// snapshot is everything observable about a set without side effects
// (NumAvailable starts a new interval, so it is left out).
type snapshot struct {
	free, leased, posted int
	holders, keys        []uint64
	closed               bool
	attached             int
}

func snap(s *slots.Set) snapshot {
	sn := snapshot{free: s.Free(), closed: s.Closed(), attached: s.Attached()}
	sn.leased, sn.posted = s.Count()
	for i := range s.Len() {
		sn.holders = append(sn.holders, s.Holder(uint32(i)))
		sn.keys = append(sn.keys, s.Key(uint32(i)))
	}
	return sn
}

// TestTakeLowFirst: a new set hands out 0, 1, 2, … to the holder that asks,
// then nothing; a released slot is handed out again.
func TestTakeLowFirst(t *testing.T) {
	s := slots.NewSet(4)
	assert.Equal(t, 4, s.Len())
	assert.Equal(t, 4, s.Free())
	for want := range uint32(4) {
		id, ok := s.Take(alice)
		require.True(t, ok)
		assert.Equal(t, want, id)
		assert.Equal(t, alice, s.Holder(id))
		assert.True(t, s.Leased(id))
	}
	assert.Equal(t, 0, s.Free())
	_, ok := s.Take(alice)
	assert.False(t, ok, "no slot is free")

	require.True(t, s.Release(2, alice))
	assert.Equal(t, 1, s.Free())
	id, ok := s.Take(bob)
	require.True(t, ok)
	assert.Equal(t, uint32(2), id, "the released slot is the free one")
	assert.Equal(t, bob, s.Holder(id))
}

// TestTakeRefuses: holder 0 (the free slot's holder) gets nothing and
// changes nothing, nor does a Take from an empty or closed set.
func TestTakeRefuses(t *testing.T) {
	s := slots.NewSet(2)
	before := snap(s)
	_, ok := s.Take(0)
	assert.False(t, ok, "holder 0")
	assert.Equal(t, before, snap(s))
	assert.Equal(t, 2, s.NumAvailable(), "a refused Take does not move the fewest-free count")

	take(t, s, alice)
	take(t, s, alice)
	_, ok = s.Take(bob)
	assert.False(t, ok, "empty")

	empty := slots.NewSet(0)
	_, ok = empty.Take(alice)
	assert.False(t, ok, "a set of no slots")

	require.True(t, s.Release(0, alice))
	require.NoError(t, s.Close())
	before = snap(s)
	_, ok = s.Take(alice)
	assert.False(t, ok, "closed, although a slot is free")
	assert.Equal(t, before, snap(s))
}

// TestNumAvailable: the fewest free slots since the previous call, then the
// interval starts again at the number free now.
func TestNumAvailable(t *testing.T) {
	s := slots.NewSet(4)
	assert.Equal(t, 4, s.NumAvailable(), "nothing taken yet")
	a, b, c := take(t, s, alice), take(t, s, alice), take(t, s, alice)
	require.True(t, s.Release(a, alice))
	require.True(t, s.Release(b, alice))
	assert.Equal(t, 3, s.Free())
	assert.Equal(t, 1, s.NumAvailable(), "the fewest since the last look, not the number free now")
	assert.Equal(t, 3, s.NumAvailable(), "a new interval starts at the number free")

	d := take(t, s, bob)
	require.True(t, s.Release(d, bob))
	assert.Equal(t, 2, s.NumAvailable())
	assert.Equal(t, 3, s.NumAvailable())

	require.True(t, s.Release(c, alice))
	assert.Equal(t, 3, s.NumAvailable(), "a release does not raise the minimum of its interval")
	assert.Equal(t, 4, s.NumAvailable())

	for range 4 {
		take(t, s, alice)
	}
	_, ok := s.Take(alice)
	require.False(t, ok)
	assert.Equal(t, 0, s.NumAvailable())
	assert.Equal(t, 0, s.NumAvailable(), "still none free")
}

// TestRelease: only the holder that leased a slot gives it back, once, and
// never while it is posted or free.
func TestRelease(t *testing.T) {
	s := slots.NewSet(3)
	id := take(t, s, alice)
	before := snap(s)
	assert.False(t, s.Release(id, bob), "someone else's slot")
	assert.False(t, s.Release(id, 0), "holder 0")
	assert.Equal(t, before, snap(s))

	assert.True(t, s.Release(id, alice))
	assert.Equal(t, 3, s.Free())
	assert.Equal(t, uint64(0), s.Holder(id), "a free slot has no holder")
	assert.False(t, s.Leased(id))

	before = snap(s)
	assert.False(t, s.Release(id, alice), "released twice")
	assert.False(t, s.Release(id, 0), "a free slot, with the free slot's holder")
	assert.Equal(t, before, snap(s), "the free stack holds the slot once")

	p := takePosted(t, s, alice, 7)
	before = snap(s)
	assert.False(t, s.Release(p, alice), "a posted slot belongs to the provider")
	assert.Equal(t, before, snap(s))
}

// TestMarkPosted: only the holder of a leased slot posts it; the key is
// recorded, and a refused post leaves the key alone.
func TestMarkPosted(t *testing.T) {
	s := slots.NewSet(3)
	id := take(t, s, alice)

	before := snap(s)
	assert.False(t, s.MarkPosted(id, bob, 99), "someone else's slot")
	assert.False(t, s.MarkPosted(2, alice, 99), "a free slot")
	assert.Equal(t, before, snap(s), "nothing changed, not even a key")

	assert.True(t, s.MarkPosted(id, alice, 42))
	assert.Equal(t, uint64(42), s.Key(id))
	assert.False(t, s.Leased(id), "posted, not leased")
	nLeased, nPosted := s.Count()
	assert.Equal(t, 0, nLeased)
	assert.Equal(t, 1, nPosted)

	before = snap(s)
	assert.False(t, s.MarkPosted(id, alice, 43), "posted already")
	assert.Equal(t, before, snap(s))
	assert.Equal(t, uint64(42), s.Key(id), "the first post's key stays")

	key, ok := s.Claim(id, alice)
	assert.True(t, ok)
	assert.Equal(t, uint64(42), key)
}

// TestUnpost: a post the provider refused goes back to leased, for its
// holder only.
func TestUnpost(t *testing.T) {
	s := slots.NewSet(2)
	id := takePosted(t, s, alice, 5)

	before := snap(s)
	s.Unpost(id, bob)
	assert.Equal(t, before, snap(s), "someone else's post")

	s.Unpost(id, alice)
	assert.True(t, s.Leased(id))
	assert.Equal(t, alice, s.Holder(id))
	_, ok := s.Claim(id, alice)
	assert.False(t, ok, "nothing posted to claim")

	before = snap(s)
	s.Unpost(id, alice)
	assert.Equal(t, before, snap(s), "a leased slot stays leased")
	s.Unpost(1, alice)
	assert.Equal(t, before, snap(s), "a free slot stays free")

	assert.True(t, s.Release(id, alice), "an unposted slot is released as leased")
	assert.Equal(t, 2, s.Free())
}

// TestClaim: the first Claim of a posted slot returns its key and leaves it
// leased to the holder until Release; every later Claim, and any Claim by
// someone else or of a slot not posted, reports false.
func TestClaim(t *testing.T) {
	s := slots.NewSet(3)
	id := takePosted(t, s, alice, 1234)

	before := snap(s)
	_, ok := s.Claim(id, bob)
	assert.False(t, ok, "someone else's post")
	assert.Equal(t, before, snap(s))

	key, ok := s.Claim(id, alice)
	assert.True(t, ok)
	assert.Equal(t, uint64(1234), key)
	assert.True(t, s.Leased(id), "leased again, until Release")
	assert.Equal(t, alice, s.Holder(id))
	assert.Equal(t, 2, s.Free(), "not free before Release")

	before = snap(s)
	key, ok = s.Claim(id, alice)
	assert.False(t, ok, "claimed twice")
	assert.Zero(t, key)
	assert.Equal(t, before, snap(s))

	leasedOnly := take(t, s, alice)
	_, ok = s.Claim(leasedOnly, alice)
	assert.False(t, ok, "leased, never posted")
	_, ok = s.Claim(2, alice)
	assert.False(t, ok, "free")

	assert.True(t, s.Release(id, alice))
	assert.Equal(t, 2, s.Free())
	_, ok = s.Claim(id, alice)
	assert.False(t, ok, "released")
}

// TestComplete: Claim then Release, once.
func TestComplete(t *testing.T) {
	s := slots.NewSet(2)
	id := takePosted(t, s, alice, 77)

	_, ok := s.Complete(id, bob)
	assert.False(t, ok, "someone else's post")
	assert.Equal(t, 1, s.Free())

	key, ok := s.Complete(id, alice)
	assert.True(t, ok)
	assert.Equal(t, uint64(77), key)
	assert.Equal(t, 2, s.Free(), "back on the free stack")
	assert.Equal(t, uint64(0), s.Holder(id))
	assert.False(t, s.Leased(id))

	before := snap(s)
	key, ok = s.Complete(id, alice)
	assert.False(t, ok, "completed twice")
	assert.Zero(t, key)
	assert.Equal(t, before, snap(s), "the slot is on the free stack once")

	l := take(t, s, alice)
	_, ok = s.Complete(l, alice)
	assert.False(t, ok, "leased, never posted")
	assert.True(t, s.Leased(l))
}

// TestPosted: the slots a holder posted, appended to dst, in order; not its
// leased ones, not other holders'.
func TestPosted(t *testing.T) {
	s := slots.NewSet(5)
	a0 := takePosted(t, s, alice, 1)
	b1 := takePosted(t, s, bob, 2)
	a2 := takePosted(t, s, alice, 3)
	take(t, s, alice) // leased, not posted

	assert.Equal(t, []uint32{a0, a2}, s.Posted(nil, alice))
	assert.Equal(t, []uint32{b1}, s.Posted(nil, bob))
	assert.Empty(t, s.Posted(nil, 3))
	assert.Empty(t, s.Posted(nil, 0), "free slots are no one's posts")
	assert.Equal(t, []uint32{9, a0, a2}, s.Posted([]uint32{9}, alice), "appended")

	_, ok := s.Claim(a0, alice)
	require.True(t, ok)
	assert.Equal(t, []uint32{a2}, s.Posted(nil, alice), "claimed is not posted")
}

// TestPostedMarked: the mark goes on the appended slots only.
func TestPostedMarked(t *testing.T) {
	s := slots.NewSet(4)
	a0 := takePosted(t, s, alice, 1)
	takePosted(t, s, bob, 2)
	a2 := takePosted(t, s, alice, 3)
	const mark = 1 << 30
	assert.Equal(t, []uint32{7, a0 | mark, a2 | mark}, s.PostedMarked([]uint32{7}, alice, mark))
	assert.Equal(t, []uint32{a0, a2}, s.PostedMarked(nil, alice, 0))
}

// TestReclaim: a closing holder's leased slots go back; its posted slots
// and other holders' slots stay.
func TestReclaim(t *testing.T) {
	s := slots.NewSet(6)
	a0, a1 := take(t, s, alice), take(t, s, alice)
	a2 := takePosted(t, s, alice, 10)
	b3 := take(t, s, bob)
	b4 := takePosted(t, s, bob, 11)
	require.Equal(t, 1, s.Free())

	assert.Equal(t, 2, s.Reclaim(alice))
	assert.Equal(t, 3, s.Free())
	assert.False(t, s.Leased(a0))
	assert.False(t, s.Leased(a1))
	assert.Equal(t, []uint32{a2}, s.Posted(nil, alice), "posted stays with the provider")
	assert.True(t, s.Leased(b3))
	assert.Equal(t, bob, s.Holder(b3))
	assert.Equal(t, []uint32{b4}, s.Posted(nil, bob))

	assert.Equal(t, 0, s.Reclaim(alice), "nothing left to reclaim")
	assert.Equal(t, 0, s.Reclaim(0), "free slots are not reclaimed again")
	assert.Equal(t, 3, s.Free())
}

// TestOutOfRange: a slot number past the set changes nothing and reports
// failure (or zero).
func TestOutOfRange(t *testing.T) {
	s := slots.NewSet(3)
	take(t, s, alice)
	takePosted(t, s, alice, 8)
	before := snap(s)
	for _, id := range []uint32{3, 4, math.MaxUint32} {
		assert.False(t, s.Release(id, alice), "Release(%d)", id)
		assert.False(t, s.MarkPosted(id, alice, 1), "MarkPosted(%d)", id)
		s.Unpost(id, alice)
		_, ok := s.Claim(id, alice)
		assert.False(t, ok, "Claim(%d)", id)
		_, ok = s.Complete(id, alice)
		assert.False(t, ok, "Complete(%d)", id)
		assert.Zero(t, s.Key(id), "Key(%d)", id)
		assert.Zero(t, s.Holder(id), "Holder(%d)", id)
		assert.False(t, s.Leased(id), "Leased(%d)", id)
	}
	assert.Equal(t, before, snap(s))
}

// TestClose: Close refuses, changing nothing, while a slot is posted or a
// user is attached; then it succeeds, refuses Take and Attach, and is
// idempotent. A slot leased at Close may still be released.
func TestClose(t *testing.T) {
	s := slots.NewSet(3)
	p := takePosted(t, s, alice, 1)
	l := take(t, s, alice)
	require.True(t, s.Attach())
	require.True(t, s.Attach())
	assert.Equal(t, 2, s.Attached())

	before := snap(s)
	err := s.Close()
	assert.ErrorIs(t, err, netio.ErrNoResources, "attached and posted")
	assert.Equal(t, before, snap(s))
	assert.False(t, s.Closed())

	s.Detach()
	s.Detach()
	assert.Equal(t, 0, s.Attached())
	before = snap(s)
	err = s.Close()
	assert.ErrorIs(t, err, netio.ErrNoResources, "posted")
	assert.Equal(t, before, snap(s))
	assert.False(t, s.Closed())
	id, ok := s.Take(bob)
	assert.True(t, ok, "a refused Close leaves the set open")
	require.True(t, s.Release(id, bob))

	require.True(t, s.Attach())
	_, ok = s.Claim(p, alice)
	require.True(t, ok)
	assert.ErrorIs(t, s.Close(), netio.ErrNoResources, "attached, nothing posted")
	assert.False(t, s.Closed())
	s.Detach()
	s.Detach() // one too many: stays at 0
	assert.Equal(t, 0, s.Attached())

	require.NoError(t, s.Close(), "leased slots do not hold Close up")
	assert.True(t, s.Closed())
	assert.NoError(t, s.Close(), "idempotent")
	assert.True(t, s.Closed())

	_, ok = s.Take(alice)
	assert.False(t, ok, "closed")
	assert.False(t, s.Attach(), "closed")
	assert.Equal(t, 0, s.Attached())

	// A slot leased at Close is not posted any more: its memory may be
	// deregistered, so MarkPosted backs out and the slot stays leased.
	assert.False(t, s.MarkPosted(l, alice, 2), "no post on a closed set")
	assert.True(t, s.Leased(l))
	assert.NoError(t, s.Close(), "closing twice returns nil")
	assert.True(t, s.Closed())
	_, ok = s.Claim(l, alice)
	assert.False(t, ok, "nothing posted to claim")

	free := s.Free()
	assert.True(t, s.Release(p, alice))
	assert.True(t, s.Release(l, alice))
	assert.Equal(t, free+2, s.Free(), "no OnFreeAfterClose: back on the stack")
	_, ok = s.Take(alice)
	assert.False(t, ok, "still closed")
}

// TestCloseWithoutPosts: an idle set closes at once.
func TestCloseWithoutPosts(t *testing.T) {
	s := slots.NewSet(2)
	assert.NoError(t, s.Close())
	assert.True(t, s.Closed())
	assert.NoError(t, s.Close())
}

// TestOnFreeAfterClose: a slot freed after Close goes to the callback, not
// to the free stack; before Close the stack takes it.
func TestOnFreeAfterClose(t *testing.T) {
	s := slots.NewSet(4)
	var got []uint32
	s.OnFreeAfterClose(func(id uint32) { got = append(got, id) })

	early := take(t, s, alice)
	require.True(t, s.Release(early, alice))
	assert.Empty(t, got, "open: the free stack takes it")
	assert.Equal(t, 4, s.Free())

	a, b := take(t, s, alice), take(t, s, bob)
	p := takePosted(t, s, alice, 3)
	_, ok := s.Claim(p, alice)
	require.True(t, ok)
	require.NoError(t, s.Close())
	free := s.Free()

	assert.True(t, s.Release(b, bob))
	assert.True(t, s.Release(a, alice))
	assert.False(t, s.Release(a, alice), "once")
	assert.True(t, s.Release(p, alice))
	assert.Equal(t, []uint32{b, a, p}, got)
	assert.Equal(t, free, s.Free(), "the free stack does not grow after Close")
	for _, id := range got {
		assert.Zero(t, s.Holder(id), "slot %d has no holder", id)
		assert.False(t, s.Leased(id))
	}
}

// TestMarkPostedRacesRelease: a holder's post and release of the same
// leased slot race (as a post and a Reclaim of a closing endpoint might):
// exactly one wins, and the slot ends posted or free accordingly, never
// posted after it went back to the free stack.
func TestMarkPostedRacesRelease(t *testing.T) {
	s := slots.NewSet(1)
	for round := range uint64(2000) {
		id := take(t, s, alice)
		var posted, released bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); posted = s.MarkPosted(id, alice, round) }()
		go func() { defer wg.Done(); released = s.Release(id, alice) }()
		wg.Wait()
		require.NotEqual(t, posted, released, "round %d: exactly one of post and release wins", round)
		nLeased, nPosted := s.Count()
		if posted {
			require.Equal(t, []int{0, 1, 0}, []int{nLeased, nPosted, s.Free()}, "round %d: posted", round)
			key, ok := s.Complete(id, alice)
			require.True(t, ok)
			require.Equal(t, round, key)
		} else {
			require.Equal(t, []int{0, 0, 1}, []int{nLeased, nPosted, s.Free()}, "round %d: released", round)
		}
	}
}

// TestConcurrent: holders take, post, claim and release from several
// goroutines while a sweeper claims their posts too (as a closing endpoint
// would): no slot is handed to two holders at once, every post is claimed
// exactly once with its own key, and at the end every slot is free.
func TestConcurrent(t *testing.T) {
	const (
		n       = 8
		holders = 6
		rounds  = 1500
	)
	s := slots.NewSet(n)
	var (
		inUse                     [n]atomic.Int32 // 1 while some holder has the slot
		posts, ownWins, sweepWins atomic.Int64
		postedKeys, claimedKeys   atomic.Uint64 // sums
		done                      = make(chan struct{})
		workers, sweeper          sync.WaitGroup
	)
	// claimed is what the winner of a Claim does: check the key, let go.
	claimed := func(id uint32, h, key uint64) {
		assert.Equal(t, h, key>>32, "slot %d: key %#x is another holder's", id, key)
		claimedKeys.Add(key)
		assert.True(t, inUse[id].CompareAndSwap(1, 0), "slot %d", id)
		assert.True(t, s.Release(id, h), "slot %d: release after a won claim", id)
	}

	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		var dst []uint32
		for {
			select {
			case <-done:
				return
			default:
			}
			for h := uint64(1); h <= holders; h++ {
				dst = s.Posted(dst[:0], h)
				for _, id := range dst {
					if key, ok := s.Claim(id, h); ok {
						sweepWins.Add(1)
						claimed(id, h, key)
					}
				}
			}
			_ = s.NumAvailable()
			runtime.Gosched()
		}
	}()

	for h := uint64(1); h <= holders; h++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for r := range uint64(rounds) {
				id, ok := s.Take(h)
				if !ok {
					runtime.Gosched()
					continue
				}
				if !assert.Less(t, id, uint32(n)) {
					return
				}
				assert.True(t, inUse[id].CompareAndSwap(0, 1), "slot %d handed out twice", id)
				assert.Equal(t, h, s.Holder(id))
				if r%3 == 0 { // some leases end without a post
					assert.True(t, inUse[id].CompareAndSwap(1, 0))
					assert.True(t, s.Release(id, h))
					continue
				}
				key := h<<32 | r
				if !assert.True(t, s.MarkPosted(id, h, key)) {
					return
				}
				posts.Add(1)
				postedKeys.Add(key)
				for range r % 4 { // give the sweeper a chance at the post
					runtime.Gosched()
				}
				if k, ok := s.Claim(id, h); ok {
					ownWins.Add(1)
					assert.Equal(t, key, k)
					claimed(id, h, k)
				}
				// Whoever won, the post is gone: only this goroutine posts
				// as h, so the slot cannot be h's post again yet.
				_, again := s.Claim(id, h)
				assert.False(t, again, "slot %d claimed twice", id)
			}
		}()
	}
	workers.Wait()
	close(done)
	sweeper.Wait()

	// Every worker claimed or saw claimed each of its posts: none is left.
	for h := uint64(1); h <= holders; h++ {
		assert.Empty(t, s.Posted(nil, h), "holder %d", h)
	}
	t.Logf("%d posts: %d claimed by their holder, %d by the sweeper", posts.Load(), ownWins.Load(), sweepWins.Load())
	assert.Positive(t, posts.Load())
	assert.Equal(t, posts.Load(), ownWins.Load()+sweepWins.Load(), "every post claimed exactly once")
	assert.Equal(t, postedKeys.Load(), claimedKeys.Load(), "every key reported once")
	assert.Equal(t, n, s.Free(), "every slot accounted for")
	nLeased, nPosted := s.Count()
	assert.Zero(t, nLeased)
	assert.Zero(t, nPosted)
	seen := map[uint32]bool{}
	for range n {
		id, ok := s.Take(alice)
		require.True(t, ok)
		require.Less(t, id, uint32(n))
		assert.False(t, seen[id], "slot %d twice on the free stack", id)
		seen[id] = true
	}
	_, ok := s.Take(alice)
	assert.False(t, ok, "exactly n slots free")
}

// TestNoAllocs: the data path of a set does not allocate.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	s := slots.NewSet(4)
	var failed bool
	allocs := testing.AllocsPerRun(1000, func() {
		id, ok := s.Take(alice)
		if !ok || !s.MarkPosted(id, alice, 5) {
			failed = true
			return
		}
		if key, ok := s.Complete(id, alice); !ok || key != 5 {
			failed = true
		}
	})
	require.False(t, failed, "Take, MarkPosted, Complete")
	assert.Zero(t, allocs)
	assert.Equal(t, 4, s.Free())
}

// exposed stands for a public type that keeps its set unexported.
type exposed struct{ set *slots.Set }

func init() {
	slots.Expose(func(public any) *slots.Set {
		if e, ok := public.(*exposed); ok && e != nil {
			return e.set
		}
		return nil
	})
}

// TestOf: Of finds the set behind a type that exposed it, and nil for
// anything else, nil included (with the lookups of sendbuf and headerbuf
// installed too, since this test imports them).
func TestOf(t *testing.T) {
	s := slots.NewSet(1)
	assert.Same(t, s, slots.Of(&exposed{set: s}))
	for name, v := range map[string]any{
		"nil":                       nil,
		"an int":                    42,
		"a string":                  "set",
		"another set":               s,
		"nil *exposed":              (*exposed)(nil),
		"nil *sendbuf.Pool":         (*sendbuf.Pool)(nil),
		"nil *headerbuf.HeaderBuf":  (*headerbuf.HeaderBuffer)(nil),
		"exposed value, no pointer": exposed{set: s},
	} {
		assert.Nil(t, slots.Of(v), name)
	}
}
