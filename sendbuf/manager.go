package sendbuf

import (
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// SendBufferManager is a pool of send buffers shared by several endpoints
// of one domain (netio3's shared send buffers): a front-end that sends to
// many event builders registers one region instead of one per connection.
// Give it to the endpoints' configs; close it after them.
type SendBufferManager struct {
	pool *Pool
	mgr  *domain.Manager
}

// NewSendBufferManager allocates p.BufferCount buffers of p.BufferSize bytes
// in mgr (defaults applied). A nil mgr is refused with an error wrapping
// netio.ErrInvalidArgument.
func NewSendBufferManager(mgr *domain.Manager, p netio.BufferedSendParams) (*SendBufferManager, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: sendbuf: shared buffers: nil domain manager", netio.ErrInvalidArgument)
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	bufs, err := NewPool(mgr, p.BufferSize, p.BufferCount)
	if err != nil {
		return nil, err
	}
	return &SendBufferManager{pool: bufs, mgr: mgr}, nil
}

// Pool returns the shared pool.
func (m *SendBufferManager) Pool() *Pool { return m.pool }

// Domain returns the domain the buffers are registered in.
func (m *SendBufferManager) Domain() *domain.Manager { return m.mgr }

// Endpoints returns the number of open endpoints using the buffers.
func (m *SendBufferManager) Endpoints() int { return m.pool.set.Attached() }

// Close releases the buffers. It fails with an error wrapping
// netio.ErrNoResources, changing nothing, while endpoints use them or
// buffers are in flight. It is idempotent.
func (m *SendBufferManager) Close() error { return m.pool.Close() }
