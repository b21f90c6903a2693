package pool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio"
)

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
