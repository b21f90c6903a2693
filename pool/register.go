package pool

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/netio-go/netio/domain"
)

// mapping is one allocation from the Allocator. The configured buffers of a
// tier share one; a buffer added later has its own. It is unmapped when the
// last buffer in it has been deregistered.
type mapping struct {
	mem  []byte
	live atomic.Int32
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
	t.readMin.Store(noMin)
	t.publish()
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
