package sendbuf

import (
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
)

// Source says where a send endpoint's buffers come from; every sender
// config (endpoint.SendConfig, rdm.Config) holds one as Buffers. The zero
// value registers Params.BufferCount buffers of Params.BufferSize for the
// endpoint alone. Shared and Pooled name the other two sources. Whatever
// the source, buffer IDs, keys and the rest of the contract are the same.
type Source struct {
	shared *SendBufferManager
	pool   *pool.Pool
	named  bool // Shared or Pooled was called, nil or not
}

// Shared draws the endpoint's buffers from m, shared by endpoints of its
// domain (netio3's shared send buffers); the buffer size and count are
// then m's. Close m after the endpoints.
func Shared(m *SendBufferManager) Source { return Source{shared: m, named: true} }

// Pooled leases the endpoint's Params.BufferCount buffers of at least
// Params.BufferSize bytes from p when it opens: a free buffer, else a new
// one within the pool's budget (pool.Pool.GetOrExtend); the open fails
// with an error wrapping netio.ErrNoResources when the pool cannot supply
// them all. The leases go back at Close; a buffer the caller still holds
// goes back when the caller releases it or, failing that, once it and the
// endpoint are unreachable. The pool must belong to the endpoint's domain
// and be registered with domain.AccessSend and nothing more. Close p after
// the endpoint.
func Pooled(p *pool.Pool) Source { return Source{pool: p, named: true} }

// SharedManager returns the manager of a Shared source, else nil.
func (s Source) SharedManager() *SendBufferManager { return s.shared }

// LeasePool returns the pool of a Pooled source, else nil.
func (s Source) LeasePool() *pool.Pool { return s.pool }

// Check refuses a source an endpoint of mgr cannot use, with an error
// wrapping netio.ErrInvalidArgument: Shared or Pooled of nil, a manager or
// pool of another domain, a pool registered with other access than send.
func (s Source) Check(mgr *domain.Manager) error {
	switch {
	case s.named && s.pool == nil && s.shared == nil:
		return fmt.Errorf("%w: sendbuf: Shared or Pooled of nil", netio.ErrInvalidArgument)
	case s.pool != nil:
		return slots.CheckPool(s.pool, mgr, domain.AccessSend)
	case s.shared != nil && s.shared.Domain() != mgr:
		return fmt.Errorf("%w: sendbuf: shared buffers belong to another domain", netio.ErrInvalidArgument)
	}
	return nil
}
