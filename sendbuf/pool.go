// Package sendbuf holds registered send buffers: NetworkBuffer (registered
// memory with an ID), the Pool an endpoint draws them from, and the
// SendBufferManager that lets several endpoints of one domain share a pool.
// A Pool's buffers are cut from one region of its own (NewPool) or leased
// from a pool.Pool (NewPoolFrom).
//
// A buffer has one owner at a time: the pool (free), the caller (leased
// with an endpoint's GetBuffer) or the provider (posted by SendBuffer).
// Only the endpoints move a buffer between those states; nothing here lets
// a caller do it by hand.
package sendbuf

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
)

// NetworkBuffer is one registered send buffer. Fill Bytes() and hand it to
// the endpoint that leased it; do not touch it after that until the
// endpoint gives it back.
type NetworkBuffer struct {
	id   uint32
	mem  *slots.Piece
	pool *Pool
}

// ID returns the buffer's ID: its key in completions and ReleaseBuffer.
func (b *NetworkBuffer) ID() uint64 { return uint64(b.id) }

// Bytes returns the whole buffer; its length is the buffer size.
func (b *NetworkBuffer) Bytes() []byte { return b.mem.Bytes }

// Size returns the buffer size in bytes.
func (b *NetworkBuffer) Size() int { return len(b.mem.Bytes) }

// Addr returns the address of the buffer's first byte.
func (b *NetworkBuffer) Addr() uintptr { return b.mem.Addr }

// Desc returns the registration descriptor to send the buffer with.
func (b *NetworkBuffer) Desc() uintptr { return b.mem.Desc }

// Pool returns the pool the buffer belongs to.
func (b *NetworkBuffer) Pool() *Pool { return b.pool }

// Pool is a fixed set of equal send buffers: cut from one registered
// region (one registration, FI_SEND access only), or leased from a
// pool.Pool. It is safe for concurrent use. Endpoints lease, post and
// complete its buffers; its own methods only look.
type Pool struct {
	set     *slots.Set
	mem     *slots.Memory
	bufs    []NetworkBuffer
	closeMu sync.Mutex // one Close at a time: the second waits for the first
}

func init() {
	slots.Expose(func(public any) *slots.Set {
		switch p := public.(type) {
		case *Pool:
			if p != nil {
				return p.set
			}
		case *SendBufferManager:
			if p != nil {
				return p.pool.set
			}
		}
		return nil
	})
}

// NewPool allocates and registers count buffers of size bytes in mgr. A nil
// mgr or a size or count out of range is refused with an error wrapping
// netio.ErrInvalidArgument.
func NewPool(mgr *domain.Manager, size, count int) (*Pool, error) {
	if mgr == nil {
		// Checked first: AllocRegistered would map the region before it
		// reached the nil Manager.
		return nil, fmt.Errorf("%w: sendbuf: nil domain manager", netio.ErrInvalidArgument)
	}
	if err := validate(size, count); err != nil {
		return nil, err
	}
	mem, err := slots.Cut(mgr, size, count, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("sendbuf: %w", err)
	}
	return newPool(mem), nil
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
	mem, err := slots.Lease(nil, src, size, count, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("sendbuf: %w", err)
	}
	return newPool(mem), nil
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

// newPool describes the buffers of mem, all free.
func newPool(mem *slots.Memory) *Pool {
	p := &Pool{set: slots.NewSet(mem.Len()), mem: mem, bufs: make([]NetworkBuffer, mem.Len())}
	for i := range p.bufs {
		p.bufs[i] = NetworkBuffer{id: uint32(i), mem: mem.Piece(uint32(i)), pool: p}
	}
	p.set.OnFreeAfterClose(mem.Release) // a held lease given back after Close
	return p
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

// NumAvailable returns the fewest free buffers seen since the previous call
// (netio3's get_num_available_buffers), and starts a new interval.
func (p *Pool) NumAvailable() int { return p.set.NumAvailable() }

// Free returns the number of free buffers now.
func (p *Pool) Free() int { return p.set.Free() }

// Len returns the number of buffers.
func (p *Pool) Len() int { return len(p.bufs) }

// BufferSize returns the size of each buffer.
func (p *Pool) BufferSize() int { return p.mem.Size() }

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
// when the caller releases it or, failing that, once the pool and every
// buffer are unreachable. It is idempotent.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.set.Closed() {
		return nil
	}
	if err := p.set.Close(); err != nil {
		return fmt.Errorf("sendbuf: %w", err)
	}
	later, err := p.mem.CloseHeld(p.set.Leased)
	if later != nil {
		runtime.AddCleanup(p, func(f func()) { f() }, later)
	}
	return err
}
