package endpoint

import (
	"github.com/rs/zerolog"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
)

// inbox is a connection's posted receive buffers, the one receive path of
// every connected endpoint: an accepted connection's (ReceiveEndpoint) and
// a dialled one's replies (DialReplies). It posts every buffer, hands a
// completed one to a callback and posts it again, and frees the memory
// once the endpoint is closed, but never under a callback that is still
// looking at a buffer. It is used on the poller goroutine only, but for
// open and postAll before the connection is up, and free, which the
// dialing goroutine calls when a dial fails (no callback can be under way
// then).
type inbox struct {
	mem *slots.Memory
	ctx func(i uint32) uint64 // buffer i's operation context
	log zerolog.Logger        // for a failure to free them after a callback

	// A Close from inside the callback must not unmap the slice it is
	// still looking at, so the memory goes after it returns.
	busy, freeLater bool
}

// open registers count buffers of size bytes for receiving, or leases them
// from src when it is not nil. ctx gives buffer i's operation context.
func (b *inbox) open(mgr *domain.Manager, src *pool.Pool, size, count int, ctx func(uint32) uint64, log zerolog.Logger) error {
	b.ctx, b.log = ctx, log
	var err error
	if src != nil {
		b.mem, err = slots.Lease(mgr, src, size, count, domain.AccessRecv)
	} else {
		b.mem, err = slots.Cut(mgr, size, count, domain.AccessRecv)
	}
	return err
}

// postAll posts every buffer on ep in one call.
func (b *inbox) postAll(ep *fabric.Endpoint) error { return b.mem.PostReceives(ep, b.ctx) }

// deliver passes the first n bytes of buffer i to fn and reports whether
// the buffer may be posted again: false when fn closed the endpoint and
// the memory was freed after it returned.
func (b *inbox) deliver(i uint32, n int, fn func(data []byte)) bool {
	data := b.mem.Piece(i).Bytes[:n:n]
	b.busy = true
	fn(data)
	b.busy = false
	if b.freeLater {
		b.freeLater = false
		if err := b.release(); err != nil {
			b.log.Error().Err(err).Msg("freeing receive buffers")
		}
		return false
	}
	return true
}

// repost posts buffer i on ep again.
func (b *inbox) repost(ep *fabric.Endpoint, i uint32) fabric.Errno {
	p := b.mem.Piece(i)
	return ep.Recv(p.Addr, len(p.Bytes), p.Desc, b.ctx(i))
}

// free frees the buffers once their endpoint is closed: at once, or after
// the callback under way returns. It is idempotent.
func (b *inbox) free() error {
	if b.busy {
		b.freeLater = true
		return nil
	}
	return b.release()
}

// release deregisters or hands back the memory, once.
func (b *inbox) release() error {
	if b.mem == nil {
		return nil
	}
	err := b.mem.Close()
	b.mem = nil
	return err
}
