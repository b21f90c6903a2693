package sendcore

import (
	"fmt"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/sendbuf"
)

// Buffers are a sender's send buffers and their states, from whichever
// source its config named.
type Buffers struct {
	Pool   *sendbuf.Pool
	Set    *slots.Set // the buffers' states: the sender's table of sends in flight
	own    bool       // the sender's own pool, closed with it
	shared bool       // a SendBufferManager's pool, attached to
}

// OpenBuffers opens the buffers src names (checked with Source.Check): a
// pool of the sender's own, leases from a pool.Pool, or a shared pool, to
// which one more user is attached.
func OpenBuffers(src sendbuf.Source, mgr *domain.Manager, p netio.BufferedSendParams) (Buffers, error) {
	if m := src.SharedManager(); m != nil {
		set := slots.Of(m)
		if !set.Attach() {
			return Buffers{}, fmt.Errorf("shared send buffers: %w", netio.ErrClosed)
		}
		return Buffers{Pool: m.Pool(), Set: set, shared: true}, nil
	}
	var bufs *sendbuf.Pool
	var err error
	if leases := src.LeasePool(); leases != nil {
		bufs, err = sendbuf.NewPoolFrom(leases, p.BufferSize, p.BufferCount)
	} else {
		bufs, err = sendbuf.NewPool(mgr, p.BufferSize, p.BufferCount)
	}
	if err != nil {
		return Buffers{}, err
	}
	return Buffers{Pool: bufs, Set: slots.Of(bufs), own: true}, nil
}

// Close gives the buffers back once nothing is posted: a pool of the
// sender's own is closed; on a shared one, what holder still leases goes
// back and the sender detaches. It is safe on zero Buffers.
func (b Buffers) Close(holder uint64) error {
	switch {
	case b.own:
		return b.Pool.Close()
	case b.shared:
		b.Set.Reclaim(holder)
		b.Set.Detach()
	}
	return nil
}

// nextHolder numbers the senders of the process.
var nextHolder atomic.Uint64

// NewHolder returns a sender's identity in buffer pools, unique in the
// process: endpoints of every kind and poller may share a pool.
func NewHolder() uint64 { return nextHolder.Add(1) }
