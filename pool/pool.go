package pool

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// cacheLine pads the hot fields of tiers and the pool apart.
const cacheLine = domain.CacheLine

// idleTicks is the number of shrink ticks (IdleTimeout/4 each) a buffer must
// have been free for: a buffer freed just before a tick is eligible after
// 4 full periods, one freed just after it after 5.
const idleTicks = 5

// mapping is one allocation from the Allocator. The configured buffers of a
// tier share one; a buffer added later has its own. It is unmapped when the
// last buffer in it has been deregistered.
type mapping struct {
	mem  []byte
	live atomic.Int32
}

// slot is one registered buffer. It is owned by its tier's free list while
// free, by its handles while leased.
type slot struct {
	t    *tier
	mem  []byte // len = tier size
	addr uintptr
	reg  *domain.Registration
	m    *mapping
	// state packs the lease generation (upper 32 bits, incremented by
	// every lease) and the mask of live handles of that lease (lower 32
	// bits, one bit per handle). The mask is 0 exactly while the slot is
	// free (or destroyed). Handles change it only by CAS after checking
	// their generation and bit, so a stale handle can never touch a later
	// lease.
	state atomic.Uint64
	// next is where Ref starts looking for a free handle bit: bits are
	// handed out round robin, so a released handle's bit is reused as late
	// as possible. Only a hint; state decides.
	next atomic.Uint32
	// extra marks a buffer added above the configured count: only those
	// are shrunk after IdleTimeout.
	extra bool
	// freedAt is the shrink epoch of the last return to the free list.
	// Guarded by t.mu.
	freedAt int64
}

// Layout of slot.state.
const (
	genShift = 32
	maskBits = 1<<genShift - 1
	maxRefs  = genShift // live handles per lease
)

// lease hands the slot, which nobody holds (mask 0), to a caller: a new
// generation with one handle (bit 0).
func (s *slot) lease() Buffer {
	st := s.state.Add(1<<genShift | 1)
	return Buffer{s: s, gen: uint32(st >> genShift), bit: 1}
}

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
	_       [cacheLine]byte
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
		return nil
	}
	if f := len(t.free) + len(t.extra); f < t.minFree {
		t.minFree = f
	}
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
	t.mu.Unlock()
	if waiting {
		p.handoff(t)
	}
}

// Buffer is a handle to a leased, registered buffer. It is a small value:
// copy it freely, but a copy is the same handle, not a new reference (use
// Ref for that). The zero Buffer is no buffer (Valid reports false); Get,
// TryGet and GetOrExtend return it when they fail.
//
// A handle names one lease of one buffer (by a generation the buffer
// bumps on every lease) and one reference within it. Handles of a lease
// share the buffer by reference count (Ref); it goes back to the pool when
// the last one is released. Release and Ref check the handle against the
// buffer's current lease atomically, so a handle released twice, or one
// kept past its lease (a stale copy, a deferred Release after an explicit
// one), never releases or refers to the buffer's next lease: that is a
// no-op.
//
// The accessors (Bytes, Size, Addr, Desc, Key, Registration) do not check
// the lease: using the memory after Release is a misuse, as with any pool,
// since it may belong to another lease by then. They must not be called on
// the zero Buffer.
type Buffer struct {
	s   *slot
	gen uint32 // lease generation
	bit uint32 // this handle's bit in the lease's mask
}

// Valid reports whether b is a handle, not the zero Buffer. It stays true
// after Release; UseCount tells whether the lease is still held.
func (b Buffer) Valid() bool { return b.s != nil }

// Bytes returns the buffer's memory; its length is the tier size, which is
// at least the size asked for.
func (b Buffer) Bytes() []byte { return b.s.mem }

// Size returns the buffer's size in bytes (its tier's size).
func (b Buffer) Size() int { return len(b.s.mem) }

// Addr returns the address of the buffer's first byte.
func (b Buffer) Addr() uintptr { return b.s.addr }

// Desc returns the registration descriptor to pass with operations on the
// buffer.
func (b Buffer) Desc() uintptr { return b.s.reg.Desc() }

// Key returns the registration key a peer uses for remote access.
func (b Buffer) Key() uint64 { return b.s.reg.Key() }

// Registration returns the buffer's own registration. Do not close it: the
// pool does, when the buffer is shrunk or the pool closed.
func (b Buffer) Registration() *domain.Registration { return b.s.reg }

// UseCount returns the number of live handles of b's lease: 0 when that
// lease has ended (the buffer is free or leased again) and for the zero
// Buffer.
func (b Buffer) UseCount() int {
	if b.s == nil {
		return 0
	}
	st := b.s.state.Load()
	if uint32(st>>genShift) != b.gen {
		return 0
	}
	return bits.OnesCount32(uint32(st & maskBits))
}

// Ref returns another handle to the same buffer and counts it; release each
// handle once. A lease has at most 32 live handles: Ref returns the zero
// Buffer when all 32 are live, when b was released (or its lease ended),
// and for the zero Buffer. It does not allocate.
//
// Handle bits are handed out round robin, and a released handle's bit is
// reused by a later Ref of the same lease only when Ref has cycled through
// the other free bits; releasing a handle again after that would release
// the newer one. So release each handle once; the guarantee against stale
// handles of earlier leases does not depend on this.
func (b Buffer) Ref() Buffer {
	s := b.s
	if s == nil {
		return Buffer{}
	}
	for {
		st := s.state.Load()
		mask := uint32(st & maskBits)
		if uint32(st>>genShift) != b.gen || mask&b.bit == 0 || mask == maskBits {
			return Buffer{}
		}
		free := ^mask
		c := s.next.Load() % maxRefs
		f := free &^ (1<<c - 1) // free bits at or above the cursor
		if f == 0 {
			f = free
		}
		nb := f & -f
		if s.state.CompareAndSwap(st, st|uint64(nb)) {
			s.next.Store(uint32(bits.TrailingZeros32(nb)) + 1)
			return Buffer{s: s, gen: b.gen, bit: nb}
		}
	}
}

// Release gives up this handle. When it was the last live handle of its
// lease, the buffer goes back to its tier (to the oldest waiter it fits, if
// any); after Close it is deregistered and unmapped.
//
// Releasing a handle again is a no-op, and so is releasing a stale handle
// whose lease has ended, even when the buffer has been leased again since:
// it never releases another lease, never frees a buffer twice. Releasing
// the zero Buffer is a no-op. (Generations are 32 bits: a stale handle
// would only match again after 2^32 more leases of its buffer.)
func (b Buffer) Release() {
	s := b.s
	if s == nil {
		return
	}
	for {
		st := s.state.Load()
		if uint32(st>>genShift) != b.gen || uint32(st)&b.bit == 0 {
			return
		}
		nst := st &^ uint64(b.bit)
		if s.state.CompareAndSwap(st, nst) {
			if nst&maskBits == 0 {
				s.t.put(s)
			}
			return
		}
	}
}

// waiter states.
const (
	waitPending  int32 = iota
	waitHanded         // a releaser handed it a buffer through ch
	waitServed         // it took a free buffer itself
	waitCanceled       // its context ended
	waitClosed         // Close woke it through ch (nil)
)

// waiter is a blocked Get.
type waiter struct {
	minSize int
	state   atomic.Int32
	ch      chan *slot // receives the handed buffer, or nil at Close
}

var waiterPool = sync.Pool{New: func() any { return &waiter{ch: make(chan *slot, 1)} }}

// Pool is a set of registered buffers in tiers of equal size. It is safe
// for concurrent use.
type Pool struct {
	// Read on every call; written rarely.
	tiers  atomic.Pointer[[]*tier] // sorted by size; replaced when a tier is added
	closed atomic.Bool
	nwait  atomic.Int32 // waiters queued
	epoch  atomic.Int64 // shrink ticks so far
	_      [cacheLine]byte

	mgr    *domain.Manager
	access domain.Access
	budget int64
	idle   time.Duration
	alloc  Allocator
	log    zerolog.Logger

	growMu     sync.Mutex // serialises growth: budget check and tier creation
	registered atomic.Int64
	peak       atomic.Int64 // written under growMu
	mapped     atomic.Int64

	waitMu  sync.Mutex
	waiters []*waiter // FIFO

	closeMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

// New registers the configured buffers in mgr and returns the pool. When
// any of them cannot be allocated or registered, New frees what it made and
// returns the error (wrapping netio.ErrNoResources for a limit). Config
// errors wrap netio.ErrInvalidArgument. Close the pool when done: with an
// IdleTimeout it runs a goroutine until then.
func New(mgr *domain.Manager, cfg Config) (*Pool, error) {
	if mgr == nil {
		return nil, invalid("nil domain manager")
	}
	l, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Pool{mgr: mgr, access: cfg.Access, budget: cfg.Budget, idle: cfg.IdleTimeout,
		alloc: cfg.Allocator, log: cfg.Logger}
	if p.access == 0 {
		p.access = domain.AccessSend
	}
	if p.alloc == nil {
		p.alloc = MmapAllocator{}
	}
	if h, ok := p.alloc.(*HugePageAllocator); ok {
		h.bind(cfg.Logger)
	}
	ts := make([]*tier, len(l.sizes))
	for i, size := range l.sizes {
		t := &tier{p: p, size: size, base: l.counts[i]}
		ts[i] = t
		if err := p.fill(t, l.counts[i]); err != nil {
			made := ts[:i+1]
			p.tiers.Store(&made)
			p.closed.Store(true)
			_ = p.sweep()
			return nil, err
		}
	}
	p.tiers.Store(&ts)
	p.peak.Store(p.registered.Load())
	if p.idle > 0 {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.shrinker()
	}
	return p, nil
}

// fill registers the n configured buffers of t in one mapping.
func (p *Pool) fill(t *tier, n int) error {
	if n == 0 {
		return nil
	}
	stride := domain.AlignUp(t.size, domain.CacheLine)
	if page := os.Getpagesize(); t.size >= page {
		// Page-aligned buffers: a NIC translates each in whole pages.
		stride = domain.AlignUp(t.size, page)
	}
	mem, err := p.alloc.Alloc(stride * n)
	if err != nil {
		return fmt.Errorf("pool: allocate %d buffers of %d bytes: %w", n, t.size, err)
	}
	m := &mapping{mem: mem}
	p.mapped.Add(int64(cap(mem)))
	m.live.Store(1) // held while filling, so a failure half-way unmaps once
	defer p.unmapRef(m)
	t.free = make([]*slot, 0, n)
	for i := range n {
		s, err := p.register(t, m, mem[i*stride:i*stride+t.size:i*stride+t.size])
		if err != nil {
			return err
		}
		t.free = append(t.free, s)
		t.count++
	}
	slices.Reverse(t.free) // lowest address on top: handed out first
	t.minFree = n
	return nil
}

// register registers one buffer in m and counts it.
func (p *Pool) register(t *tier, m *mapping, mem []byte) (*slot, error) {
	addr := uintptr(unsafe.Pointer(&mem[0]))
	reg, err := p.mgr.Register(addr, len(mem), p.access)
	if err != nil {
		return nil, fmt.Errorf("pool: register a buffer of %d bytes: %w", len(mem), err)
	}
	m.live.Add(1)
	p.registered.Add(int64(len(mem)))
	return &slot{t: t, mem: mem, addr: addr, reg: reg, m: m}, nil
}

// destroy deregisters a buffer nobody holds and unmaps its memory when it
// was the last buffer of its mapping.
func (p *Pool) destroy(s *slot) {
	if err := s.reg.Close(); err != nil {
		p.log.Error().Err(err).Int("size", len(s.mem)).Msg("pool: deregister buffer")
	}
	p.registered.Add(-int64(len(s.mem)))
	p.unmapRef(s.m)
}

func (p *Pool) unmapRef(m *mapping) {
	if m.live.Add(-1) != 0 {
		return
	}
	p.mapped.Add(-int64(cap(m.mem)))
	if err := p.alloc.Free(m.mem); err != nil {
		p.log.Error().Err(err).Msg("pool: free buffer memory")
	}
}

// Access returns the access every buffer of the pool is registered with.
func (p *Pool) Access() domain.Access { return p.access }

// Domain returns the Manager the pool registers its buffers in.
func (p *Pool) Domain() *domain.Manager { return p.mgr }

// MaxBufferSize returns the size of the largest tier (0 when there is none).
// It grows when GetOrExtend adds a tier.
func (p *Pool) MaxBufferSize() int {
	ts := *p.tiers.Load()
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1].size
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

// TryGet leases a free buffer of at least minSize bytes from the smallest
// fitting tier that has one, without blocking. It returns NoResources when
// every fitting tier is empty, InvalidArgument when minSize is negative or
// larger than every tier, and Closed after Close; the Buffer is the zero
// Buffer unless the status is OK. It does not allocate.
func (p *Pool) TryGet(minSize int) (Buffer, netio.Status) {
	if p.closed.Load() {
		return Buffer{}, netio.Closed
	}
	ts := *p.tiers.Load()
	i := fitting(ts, minSize)
	if i == len(ts) || minSize < 0 {
		return Buffer{}, netio.InvalidArgument
	}
	for _, t := range ts[i:] {
		t.mu.Lock()
		s := t.pop()
		t.mu.Unlock()
		if s != nil {
			return s.lease(), netio.OK
		}
	}
	return Buffer{}, netio.NoResources
}

// Get leases a buffer of at least minSize bytes, blocking until one is
// released when every fitting tier is empty. It returns ctx's error when ctx
// ends first (holding nothing), an error wrapping netio.ErrClosed when the
// pool is or gets closed, and one wrapping netio.ErrInvalidArgument when no
// tier fits minSize or ctx is nil. Waiters are served first come, first
// served among those a released buffer fits; see the package documentation.
// On error the Buffer is the zero Buffer. A Get that does not wait does not
// allocate.
func (p *Pool) Get(ctx context.Context, minSize int) (Buffer, error) {
	if ctx == nil {
		// Refused before leasing, so the answer does not depend on whether
		// a buffer happens to be free.
		return Buffer{}, errNilContext
	}
	b, st := p.TryGet(minSize)
	switch st {
	case netio.OK:
		return b, nil
	case netio.NoResources:
	case netio.Closed:
		return Buffer{}, errClosed
	default:
		return Buffer{}, p.errNoFit(minSize)
	}
	if err := ctx.Err(); err != nil {
		return Buffer{}, err
	}
	w := waiterPool.Get().(*waiter)
	w.minSize = minSize
	w.state.Store(waitPending)
	defer waiterPool.Put(w)

	// Count first, then queue, then look again: a release that pushed its
	// buffer before we counted ourselves is found by the second look, one
	// after sees the count and hands its buffer over.
	p.nwait.Add(1)
	p.waitMu.Lock()
	if p.closed.Load() {
		p.nwait.Add(-1)
		p.waitMu.Unlock()
		return Buffer{}, errClosed
	}
	p.waiters = append(p.waiters, w)
	p.waitMu.Unlock()

	if s, closed := p.claim(w); s != nil {
		p.dequeue(w)
		return s.lease(), nil
	} else if closed && w.state.CompareAndSwap(waitPending, waitClosed) {
		p.dequeue(w)
		return Buffer{}, errClosed
	}
	select {
	case s := <-w.ch:
		if s == nil {
			return Buffer{}, errClosed
		}
		return s.lease(), nil
	case <-ctx.Done():
		if w.state.CompareAndSwap(waitPending, waitCanceled) {
			p.dequeue(w)
			return Buffer{}, ctx.Err()
		}
		// Handed a buffer (or closed) just now: give the buffer to the
		// next waiter; the caller asked to stop waiting.
		if s := <-w.ch; s != nil {
			s.t.put(s)
		}
		return Buffer{}, ctx.Err()
	}
}

var (
	errClosed     = fmt.Errorf("pool: %w", netio.ErrClosed)
	errNilContext = fmt.Errorf("%w: pool: get: nil context", netio.ErrInvalidArgument)
)

func (p *Pool) errNoFit(minSize int) error {
	return fmt.Errorf("%w: pool: no tier holds %d bytes (largest %d)", netio.ErrInvalidArgument, minSize, p.MaxBufferSize())
}

// claim is a queued waiter's own look at the free lists. It takes a buffer
// only if it wins the waiter's state, so a waiter never gets two. closed
// reports that the pool was closed.
func (p *Pool) claim(w *waiter) (s *slot, closed bool) {
	ts := *p.tiers.Load()
	for _, t := range ts[fitting(ts, w.minSize):] {
		t.mu.Lock()
		if p.closed.Load() {
			t.mu.Unlock()
			return nil, true
		}
		if len(t.free)+len(t.extra) > 0 {
			if w.state.CompareAndSwap(waitPending, waitServed) {
				s = t.pop()
			}
			t.mu.Unlock()
			return s, false // nil: handed one meanwhile
		}
		t.mu.Unlock()
	}
	return nil, false
}

// dequeue removes w from the queue if it is still there.
func (p *Pool) dequeue(w *waiter) {
	p.waitMu.Lock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.nwait.Add(-1)
	}
	p.waitMu.Unlock()
}

// handoff gives free buffers of t to the oldest waiters they fit.
func (p *Pool) handoff(t *tier) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	for i := 0; i < len(p.waiters); {
		w := p.waiters[i]
		if w.minSize > t.size {
			i++
			continue
		}
		t.mu.Lock()
		if len(t.free)+len(t.extra) == 0 {
			t.mu.Unlock()
			return // taken meanwhile; its release will come back here
		}
		if !w.state.CompareAndSwap(waitPending, waitHanded) {
			t.mu.Unlock()
			i++ // served itself or canceled: it dequeues itself
			continue
		}
		s := t.pop()
		t.mu.Unlock()
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.nwait.Add(-1)
		w.ch <- s
	}
}

// GetOrExtend leases a free buffer of at least minSize bytes like TryGet;
// when none is free it registers a new buffer in the smallest fitting tier,
// or adds a tier of exactly minSize bytes when none fits (later requests
// reuse it). It never waits for a release. Growth that would pass the
// budget or a limit of the domain fails with an error wrapping
// netio.ErrNoResources and registers nothing. On error the Buffer is the
// zero Buffer. Buffers it adds are shrunk again after IdleTimeout.
func (p *Pool) GetOrExtend(minSize int) (Buffer, error) {
	if minSize < 0 || minSize > netio.MaxBufferSize {
		return Buffer{}, invalid("buffer size %d outside 0..%d", minSize, netio.MaxBufferSize)
	}
	if b, st := p.TryGet(minSize); st == netio.OK {
		return b, nil
	} else if st == netio.Closed {
		return Buffer{}, errClosed
	}
	p.growMu.Lock()
	defer p.growMu.Unlock()
	// Another grower may have added what we need while we waited for growMu.
	if b, st := p.TryGet(minSize); st == netio.OK {
		return b, nil
	} else if st == netio.Closed {
		return Buffer{}, errClosed
	}
	ts := *p.tiers.Load()
	var t *tier
	size, newTier := minSize, false
	if i := fitting(ts, minSize); i < len(ts) {
		t = ts[i]
		size = t.size
	} else if size == 0 {
		return Buffer{}, invalid("a new tier needs a size above 0")
	}
	if reg := p.registered.Load(); p.budget > 0 && reg+int64(size) > p.budget {
		return Buffer{}, fmt.Errorf("%w: pool: registering %d bytes would pass the budget of %d (%d registered)",
			netio.ErrNoResources, size, p.budget, reg)
	}
	mem, err := p.alloc.Alloc(size)
	if err != nil {
		return Buffer{}, fmt.Errorf("pool: allocate %d bytes: %w", size, err)
	}
	m := &mapping{mem: mem}
	p.mapped.Add(int64(cap(mem)))
	if t == nil {
		t, newTier = &tier{p: p, size: size}, true
	}
	s, err := p.register(t, m, mem[:size:size])
	if err != nil {
		p.mapped.Add(-int64(cap(mem)))
		if ferr := p.alloc.Free(mem); ferr != nil {
			p.log.Error().Err(ferr).Msg("pool: free buffer memory")
		}
		return Buffer{}, err
	}
	s.extra = true
	if r := p.registered.Load(); r > p.peak.Load() {
		p.peak.Store(r)
	}
	if newTier {
		nts := slices.Clone(ts)
		nts = slices.Insert(nts, fitting(nts, size), t)
		p.tiers.Store(&nts)
	}
	t.mu.Lock()
	if p.closed.Load() {
		t.mu.Unlock()
		p.destroy(s)
		return Buffer{}, errClosed
	}
	t.count++
	t.mu.Unlock()
	return s.lease(), nil
}

// GetOrExtendN leases n buffers of at least minSize bytes, each as
// GetOrExtend does, and appends them to dst: all of them or none. When one
// cannot be had, the ones already leased are released, and the error
// (wrapping that of GetOrExtend) comes back with dst's elements as they
// were. It is for owners of a fixed set of buffers, such as an endpoint's
// send or receive buffers.
func (p *Pool) GetOrExtendN(dst []Buffer, minSize, n int) ([]Buffer, error) {
	if n < 0 {
		return dst, invalid("lease %d buffers", n)
	}
	start := len(dst)
	for range n {
		b, err := p.GetOrExtend(minSize)
		if err != nil {
			for _, got := range dst[start:] {
				got.Release()
			}
			clear(dst[start:])
			return dst[:start], fmt.Errorf("pool: lease %d buffers of %d bytes (%d leased): %w", n, minSize, len(dst)-start, err)
		}
		dst = append(dst, b)
	}
	return dst, nil
}

// shrinker advances the idle epoch every IdleTimeout/4 and frees extra
// buffers that have been free for idleTicks epochs.
func (p *Pool) shrinker() {
	defer close(p.done)
	period := max(p.idle/(idleTicks-1), time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			e := p.epoch.Add(1)
			p.shrink(e - idleTicks)
		}
	}
}

// shrink frees the extra buffers freed at or before epoch.
func (p *Pool) shrink(epoch int64) {
	var victims []*slot
	for _, t := range *p.tiers.Load() {
		t.mu.Lock()
		// extra is in release order, oldest first.
		n := 0
		for n < len(t.extra) && t.extra[n].freedAt <= epoch {
			n++
		}
		if n > 0 {
			victims = append(victims, t.extra[:n]...)
			t.extra = slices.Delete(t.extra, 0, n)
			t.count -= n
			t.minFree = min(t.minFree, len(t.free)+len(t.extra))
		}
		t.mu.Unlock()
	}
	for _, s := range victims {
		p.destroy(s)
	}
	if len(victims) > 0 {
		p.log.Debug().Int("buffers", len(victims)).Int64("registered", p.registered.Load()).Msg("pool: shrunk idle buffers")
	}
}

// Close stops the pool: later Gets fail with netio.ErrClosed (TryGet with
// netio.Closed), waiting Gets are woken with that error, and the free
// buffers are deregistered and unmapped at once. Leased buffers stay valid
// and are freed when their last handle is released. Close is idempotent.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.waitMu.Lock()
	for _, w := range p.waiters {
		if w.state.CompareAndSwap(waitPending, waitClosed) {
			w.ch <- nil
		}
	}
	p.nwait.Add(-int32(len(p.waiters)))
	p.waiters = nil
	p.waitMu.Unlock()
	return p.sweep()
}

// sweep frees every free buffer of a closed pool.
func (p *Pool) sweep() error {
	var victims []*slot
	for _, t := range *p.tiers.Load() {
		t.mu.Lock()
		victims = append(victims, t.free...)
		victims = append(victims, t.extra...)
		t.count -= len(t.free) + len(t.extra)
		t.free, t.extra = nil, nil
		t.mu.Unlock()
	}
	var errs []error
	for _, s := range victims {
		errs = append(errs, s.reg.Close())
		p.registered.Add(-int64(len(s.mem)))
		p.unmapRef(s.m)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool: close: %w", err)
	}
	return nil
}

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
	Closed          bool
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
