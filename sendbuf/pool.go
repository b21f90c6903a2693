// Package sendbuf holds registered send buffers: NetworkBuffer (registered
// memory with an ID), the Pool an endpoint draws them from, and the
// SendBufferManager that lets several endpoints of one domain share a pool.
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
func (b *NetworkBuffer) Desc() uintptr { return b.pool.reg.Desc() }

// Pool returns the pool the buffer belongs to.
func (b *NetworkBuffer) Pool() *Pool { return b.pool }

// Pool is a fixed set of equal send buffers cut from one registered region
// (one registration, FI_SEND access only). It is safe for concurrent use;
// Get and Put do not allocate.
type Pool struct {
	reg  *domain.Registration
	bufs []NetworkBuffer

	mu       sync.Mutex
	free     []uint32 // stack of free buffer IDs
	minFree  int      // fewest free buffers since the last NumAvailable
	closed   bool
	capacity int
}

// NewPool allocates and registers count buffers of size bytes in mgr.
func NewPool(mgr *domain.Manager, size, count int) (*Pool, error) {
	if err := (netio.BufferedSendParams{BufferSize: size, BufferCount: count}).Validate(); err != nil {
		return nil, err
	}
	if size <= 0 || count <= 0 {
		return nil, fmt.Errorf("%w: sendbuf: %d buffers of %d bytes", netio.ErrInvalidArgument, count, size)
	}
	stride := domain.AlignUp(size, domain.CacheLine)
	reg, err := mgr.AllocRegistered(stride*count, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("sendbuf: %w", err)
	}
	mem := reg.Bytes()
	p := &Pool{reg: reg, bufs: make([]NetworkBuffer, count), free: make([]uint32, count), capacity: count}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.id, b.pool = uint32(i), p
		b.data = mem[i*stride : i*stride+size : i*stride+size]
		b.addr = uintptr(unsafe.Pointer(&b.data[0]))
		p.free[count-1-i] = uint32(i) // hand out low IDs first
	}
	p.minFree = count
	return p, nil
}

// Get leases a free buffer to holder (an endpoint's non-zero identity), or
// returns nil when none is free or the pool is closed.
func (p *Pool) Get(holder uint64) *NetworkBuffer {
	p.mu.Lock()
	n := len(p.free)
	if n == 0 || p.closed {
		p.minFree = 0
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
// changing nothing, when the buffer is not leased by holder.
func (p *Pool) MarkPosted(b *NetworkBuffer, holder uint64) bool {
	return b.holder.Load() == holder && b.state.CompareAndSwap(stateLeased, statePosted)
}

// Unpost moves a posted buffer back to leased, for a post the provider
// refused.
func (p *Pool) Unpost(b *NetworkBuffer) {
	b.state.CompareAndSwap(statePosted, stateLeased)
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

// Close deregisters the buffers. Buffers still posted make Close fail with
// netio.ErrNoResources and change nothing: the provider may still read them.
// Buffers a caller still holds stay mapped (no longer registered) until the
// pool and every buffer are unreachable, so a late write never faults; the
// rest is unmapped at once. It is idempotent.
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
	mem, err := p.reg.Detach()
	if leased == 0 {
		return errors.Join(err, domain.Free(mem))
	}
	runtime.AddCleanup(p, func(mem []byte) { _ = domain.Free(mem) }, mem)
	return err
}
