package sendbuf

import "github.com/netio-go/netio"

// The state transitions the endpoints make through internal/slots, under
// the names the tests use.

func (p *Pool) Get(holder uint64) *NetworkBuffer {
	id, ok := p.set.Take(holder)
	if !ok {
		return nil
	}
	return &p.bufs[id]
}

func (p *Pool) Release(id, holder uint64) netio.Status {
	if id > uint64(^uint32(0)) || !p.set.Release(uint32(id), holder) {
		return netio.InvalidArgument
	}
	return netio.OK
}

func (p *Pool) MarkPosted(b *NetworkBuffer, holder uint64) bool {
	return p.Owns(b) && p.set.MarkPosted(b.id, holder, uint64(b.id))
}

func (p *Pool) Unpost(b *NetworkBuffer) {
	if p.Owns(b) {
		p.set.Unpost(b.id, p.set.Holder(b.id))
	}
}

func (p *Pool) Complete(id, holder uint64) bool {
	if id > uint64(^uint32(0)) {
		return false
	}
	_, ok := p.set.Complete(uint32(id), holder)
	return ok
}

func (p *Pool) Posted(dst []uint64, holder uint64) []uint64 {
	for _, id := range p.set.Posted(nil, holder) {
		dst = append(dst, uint64(id))
	}
	return dst
}

func (p *Pool) Reclaim(holder uint64) int { return p.set.Reclaim(holder) }

func (m *SendBufferManager) Attach() error {
	if !m.pool.set.Attach() {
		return netio.ErrClosed
	}
	return nil
}

func (m *SendBufferManager) Detach() { m.pool.set.Detach() }
