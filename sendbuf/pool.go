// Package sendbuf holds registered send buffers: NetworkBuffer (registered
// memory with an ID), the Pool an endpoint draws them from, and the
// SendBufferManager that lets several endpoints of one domain share a pool.
// A Pool's buffers are cut from one region of its own (NewPool) or leased
// from a pool.Pool (NewPoolFrom).
package sendbuf

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pool"
)

// Buffer states. Every buffer has exactly one owner: the pool (free), the
// caller (leased) or the provider (posted).
const (
	stateFree uint32 = iota
	stateLeased
	statePosted
)

// NetworkBuffer is one registered send buffer. Fill Bytes() and hand it to
// an endpoint; do not touch it after that until the endpoint gives it back.
type NetworkBuffer struct {
	id     uint32
	state  atomic.Uint32
	holder atomic.Uint64 // the endpoint that leased it (non-zero while not free)
	data   []byte
	addr   uintptr
	desc   uintptr // of the buffer's own registration: leases may differ
	pool   *Pool
}

// ID returns the buffer's ID: its key in completions and ReleaseBuffer.
func (b *NetworkBuffer) ID() uint64 { return uint64(b.id) }

// Bytes returns the whole buffer; its length is the buffer size.
func (b *NetworkBuffer) Bytes() []byte { return b.data }

// Size returns the buffer size in bytes.
func (b *NetworkBuffer) Size() int { return len(b.data) }

// Addr returns the address of the buffer's first byte.
func (b *NetworkBuffer) Addr() uintptr { return b.addr }

// Desc returns the registration descriptor to send the buffer with.
func (b *NetworkBuffer) Desc() uintptr { return b.desc }

// Pool returns the pool the buffer belongs to.
func (b *NetworkBuffer) Pool() *Pool { return b.pool }

// Pool is a fixed set of equal send buffers: cut from one registered
// region (one registration, FI_SEND access only), or leased from a
// pool.Pool. It is safe for concurrent use; Get, MarkPosted, Complete and
// Release do not allocate.
type Pool struct {
	reg    *domain.Registration // the region the buffers are cut from, or nil
	leases []pool.Buffer        // the lease behind each buffer, by ID, or nil
	bufs   []NetworkBuffer

	mu       sync.Mutex
	free     []uint32 // stack of free buffer IDs
	minFree  int      // fewest free buffers since the last NumAvailable
	closed   bool
	capacity int
}

// NewPool allocates and registers count buffers of size bytes in mgr. A nil
// mgr is refused with an error wrapping netio.ErrInvalidArgument.
func NewPool(mgr *domain.Manager, size, count int) (*Pool, error) {
	if mgr == nil {
		// Checked first: AllocRegistered would map the region before it
		// reached the nil Manager.
		return nil, fmt.Errorf("%w: sendbuf: nil domain manager", netio.ErrInvalidArgument)
	}
	if err := validate(size, count); err != nil {
		return nil, err
	}
	stride := domain.AlignUp(size, domain.CacheLine)
	reg, err := mgr.AllocRegistered(stride*count, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("sendbuf: %w", err)
	}
	mem := reg.Bytes()
	p := newPool(count, func(i int) ([]byte, uintptr) {
		return mem[i*stride : i*stride+size : i*stride+size], reg.Desc()
	})
	p.reg = reg
	return p, nil
}

// NewPoolFrom leases count buffers of at least size bytes from src, which
// must be registered with domain.AccessSend and nothing else (least access:
// a pool that also allows receiving or remote access is refused with an
// error wrapping netio.ErrInvalidArgument), and returns a Pool over them;
// each buffer is size bytes long and keeps its own registration. Each is
// leased as src.GetOrExtend does: a free buffer, else a new one within
// src's budget. When one cannot be had, none is kept and the error wraps
// netio.ErrNoResources (or netio.ErrClosed). Close hands the leases back.
func NewPoolFrom(src *pool.Pool, size, count int) (*Pool, error) {
	if err := validate(size, count); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("%w: sendbuf: nil buffer pool", netio.ErrInvalidArgument)
	}
	if src.Access() != domain.AccessSend {
		// Exactly send: any further access would let the provider receive,
		// or a peer read or write, into buffers the caller fills.
		return nil, fmt.Errorf("%w: sendbuf: the buffer pool is registered with access %#x, send buffers need send access (%#x) and nothing more",
			netio.ErrInvalidArgument, uint64(src.Access()), uint64(domain.AccessSend))
	}
	leases, err := src.GetOrExtendN(make([]pool.Buffer, 0, count), size, count)
	if err != nil {
		return nil, fmt.Errorf("sendbuf: %w", err)
	}
	p := newPool(count, func(i int) ([]byte, uintptr) { return leases[i].Bytes()[:size:size], leases[i].Desc() })
	p.leases = leases
	return p, nil
}

func validate(size, count int) error {
	if err := (netio.BufferedSendParams{BufferSize: size, BufferCount: count}).Validate(); err != nil {
		return err
	}
	if size <= 0 || count <= 0 {
		return fmt.Errorf("%w: sendbuf: %d buffers of %d bytes", netio.ErrInvalidArgument, count, size)
	}
	return nil
}

// newPool sets up count free buffers; at returns the memory and the
// registration descriptor of buffer i.
func newPool(count int, at func(i int) ([]byte, uintptr)) *Pool {
	p := &Pool{bufs: make([]NetworkBuffer, count), free: make([]uint32, count), capacity: count, minFree: count}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.id, b.pool = uint32(i), p
		b.data, b.desc = at(i)
		b.addr = uintptr(unsafe.Pointer(&b.data[0]))
		p.free[count-1-i] = uint32(i) // hand out low IDs first
	}
	return p
}

// Get leases a free buffer to holder (an endpoint's non-zero identity), or
// returns nil when none is free, the pool is closed or holder is 0 (the
// holder of free buffers). Only taking a buffer moves the fewest-free
// count NumAvailable reports; a refused Get changes nothing.
func (p *Pool) Get(holder uint64) *NetworkBuffer {
	if holder == 0 {
		return nil
	}
	p.mu.Lock()
	n := len(p.free)
	if n == 0 || p.closed {
		// With none free, minFree is 0 already: the Get that took the last
		// buffer, or the NumAvailable that saw none, set it.
		p.mu.Unlock()
		return nil
	}
	id := p.free[n-1]
	p.free = p.free[:n-1]
	p.minFree = min(p.minFree, n-1)
	p.mu.Unlock()
	b := &p.bufs[id]
	b.holder.Store(holder)
	b.state.Store(stateLeased)
	return b
}

// Lookup returns the buffer with the given ID, or nil if there is none.
func (p *Pool) Lookup(id uint64) *NetworkBuffer {
	if id >= uint64(len(p.bufs)) {
		return nil
	}
	return &p.bufs[id]
}

// Owns reports whether b is one of the pool's buffers.
func (p *Pool) Owns(b *NetworkBuffer) bool { return b != nil && b.pool == p }

// Release returns a buffer that holder leased and did not post. It reports
// InvalidArgument, changing nothing, for an unknown ID or a buffer that is
// not leased by holder (already released, posted, or someone else's).
func (p *Pool) Release(id, holder uint64) netio.Status {
	b := p.Lookup(id)
	if b == nil || b.holder.Load() != holder || !b.state.CompareAndSwap(stateLeased, stateFree) {
		return netio.InvalidArgument
	}
	p.putBack(b)
	return netio.OK
}

// MarkPosted moves a buffer that holder leased to posted. It fails,
// changing nothing, when the buffer is nil, another pool's, or not leased
// by holder.
func (p *Pool) MarkPosted(b *NetworkBuffer, holder uint64) bool {
	return p.Owns(b) && b.holder.Load() == holder && b.state.CompareAndSwap(stateLeased, statePosted)
}

// Unpost moves a posted buffer back to leased, for a post the provider
// refused. A nil buffer, another pool's, or one not posted is left alone.
func (p *Pool) Unpost(b *NetworkBuffer) {
	if p.Owns(b) {
		b.state.CompareAndSwap(statePosted, stateLeased)
	}
}

// Complete returns a buffer holder posted to the pool after its completion.
// It reports false, changing nothing, when the buffer is not posted by
// holder: a completion is never applied twice.
func (p *Pool) Complete(id, holder uint64) bool {
	b := p.Lookup(id)
	if b == nil || b.holder.Load() != holder || !b.state.CompareAndSwap(statePosted, stateFree) {
		return false
	}
	p.putBack(b)
	return true
}

// Posted appends the IDs of the buffers holder has in flight to dst.
func (p *Pool) Posted(dst []uint64, holder uint64) []uint64 {
	for i := range p.bufs {
		b := &p.bufs[i]
		if b.state.Load() == statePosted && b.holder.Load() == holder {
			dst = append(dst, uint64(b.id))
		}
	}
	return dst
}

// Reclaim returns every buffer holder leased and never sent, for an
// endpoint that is closing. The caller must not touch those buffers again.
// It returns how many were reclaimed.
func (p *Pool) Reclaim(holder uint64) int {
	n := 0
	for i := range p.bufs {
		b := &p.bufs[i]
		if b.holder.Load() == holder && b.state.CompareAndSwap(stateLeased, stateFree) {
			p.putBack(b)
			n++
		}
	}
	return n
}

// putBack clears the holder of a buffer just made free and pushes it on the
// free stack.
func (p *Pool) putBack(b *NetworkBuffer) {
	b.holder.Store(0)
	p.push(b.id)
}

func (p *Pool) push(id uint32) {
	p.mu.Lock()
	if p.closed && p.leases != nil {
		p.mu.Unlock()
		// Given back after Close: nobody may touch it any more.
		p.leases[id].Release()
		return
	}
	p.free = append(p.free, id)
	p.mu.Unlock()
}

// NumAvailable returns the fewest free buffers seen since the previous call
// (netio3's get_num_available_buffers), and starts a new interval.
func (p *Pool) NumAvailable() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.minFree
	p.minFree = len(p.free)
	return n
}

// Free returns the number of free buffers now.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Len returns the number of buffers.
func (p *Pool) Len() int { return p.capacity }

// BufferSize returns the size of each buffer.
func (p *Pool) BufferSize() int { return len(p.bufs[0].data) }

// Close deregisters the buffers, or hands their leases back. Buffers still
// posted make Close fail with netio.ErrNoResources and change nothing: the
// provider may still read them.
//
// Buffers a caller still holds (leased, not released) stay usable, so a
// late write neither faults nor lands in someone else's buffer: keep the
// *NetworkBuffer, not only its Bytes, for as long as you write. Memory
// of the pool's own region stays mapped (no longer registered) until the
// pool and every buffer are unreachable; the rest is unmapped at once.
// Leases are handed back at once for the free buffers, and for a held one
// when the caller releases it (Release) or, failing that, once the pool
// and every buffer are unreachable. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	leased := 0
	for i := range p.bufs {
		switch p.bufs[i].state.Load() {
		case statePosted:
			return fmt.Errorf("%w: sendbuf: buffer %d still posted", netio.ErrNoResources, i)
		case stateLeased:
			leased++
		}
	}
	p.closed = true
	if p.leases != nil {
		p.releaseLeases()
		return nil
	}
	mem, err := p.reg.Detach()
	if leased == 0 {
		return errors.Join(err, domain.Free(mem))
	}
	runtime.AddCleanup(p, func(mem []byte) { _ = domain.Free(mem) }, mem)
	return err
}

// releaseLeases hands back the leases of the buffers nobody holds, and
// arranges for those a caller holds to go when the caller releases them
// (push) or the pool becomes unreachable. A lease released twice that way
// is released once: a second Release of a pool.Buffer is a no-op, even
// after the memory was leased again. Called by Close with p.mu held.
func (p *Pool) releaseLeases() {
	var held []pool.Buffer
	for i := range p.bufs {
		if p.bufs[i].state.Load() == stateLeased {
			held = append(held, p.leases[i])
		} else {
			p.leases[i].Release()
		}
	}
	if len(held) > 0 {
		runtime.AddCleanup(p, releaseAll, held)
	}
}

func releaseAll(leases []pool.Buffer) {
	for _, b := range leases {
		b.Release()
	}
}
