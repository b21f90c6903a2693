package endpoint

import (
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// BufferSource says where a buffered send endpoint's send buffers come
// from; SendConfig.Buffers holds one. The zero value registers
// Params.BufferCount buffers of Params.BufferSize for the endpoint alone.
// SharedBuffers and PooledBuffers name the other two sources. Whatever the
// source, buffer IDs, keys and the rest of the contract are the same.
type BufferSource struct {
	shared *sendbuf.SendBufferManager
	pool   *pool.Pool
	named  bool // SharedBuffers or PooledBuffers was called, nil or not
}

// SharedBuffers draws the endpoint's buffers from m, shared by endpoints
// of its domain (netio3's shared send buffers); Params.BufferSize and
// BufferCount are then m's. Close m after the endpoints.
func SharedBuffers(m *sendbuf.SendBufferManager) BufferSource {
	return BufferSource{shared: m, named: true}
}

// PooledBuffers leases the endpoint's Params.BufferCount buffers of at
// least Params.BufferSize bytes from p when it dials: a free buffer, else
// a new one within the pool's budget (pool.Pool.GetOrExtend); Dial fails
// with an error wrapping netio.ErrNoResources when the pool cannot supply
// them all. The leases go back at Close; a buffer the caller still holds
// goes back when the caller releases it (ReleaseBuffer) or, failing that,
// once it and the endpoint are unreachable. The pool must belong to the
// endpoint's domain and be registered with domain.AccessSend and nothing
// more. Close p after the endpoint.
func PooledBuffers(p *pool.Pool) BufferSource { return BufferSource{pool: p, named: true} }

// check refuses a source the endpoint of mgr cannot use.
func (b BufferSource) check(mgr *domain.Manager) error {
	switch {
	case b.named && b.pool == nil && b.shared == nil:
		return fmt.Errorf("%w: endpoint: SharedBuffers or PooledBuffers of nil", netio.ErrInvalidArgument)
	case b.pool != nil:
		return slots.CheckPool(b.pool, mgr, domain.AccessSend)
	case b.shared != nil && b.shared.Domain() != mgr:
		return fmt.Errorf("%w: endpoint: shared buffers belong to another domain", netio.ErrInvalidArgument)
	}
	return nil
}

// open returns the endpoint's buffer pool and whether the endpoint owns
// it (and closes it); a shared pool records one more user.
func (b BufferSource) open(mgr *domain.Manager, p netio.BufferedSendParams) (bufs *sendbuf.Pool, own bool, err error) {
	switch {
	case b.shared != nil:
		if !slots.Of(b.shared).Attach() {
			return nil, false, fmt.Errorf("endpoint: shared buffers: %w", netio.ErrClosed)
		}
		return b.shared.Pool(), false, nil
	case b.pool != nil:
		bufs, err = sendbuf.NewPoolFrom(b.pool, p.BufferSize, p.BufferCount)
	default:
		bufs, err = sendbuf.NewPool(mgr, p.BufferSize, p.BufferCount)
	}
	return bufs, err == nil, err
}
