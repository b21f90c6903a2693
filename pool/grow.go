package pool

import (
	"fmt"
	"slices"

	"github.com/netio-go/netio"
)

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
	t.publish()
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
