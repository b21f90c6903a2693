package sendbuf

import (
	"fmt"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// SendBufferManager is a pool of send buffers shared by several endpoints
// of one domain (netio3's shared send buffers): a front-end that sends to
// many event builders registers one region instead of one per connection.
// Endpoints Attach when they open and Detach when they close.
type SendBufferManager struct {
	pool *Pool
	mgr  *domain.Manager

	mu       sync.Mutex
	attached int
	closed   bool
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

// Attach records one more endpoint using the pool.
func (m *SendBufferManager) Attach() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("sendbuf: attach: %w", netio.ErrClosed)
	}
	m.attached++
	return nil
}

// Detach records that an endpoint stopped using the pool.
func (m *SendBufferManager) Detach() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.attached > 0 {
		m.attached--
	}
}

// Close releases the buffers. It fails, changing nothing, while endpoints
// are attached or buffers are out. It is idempotent.
func (m *SendBufferManager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if m.attached > 0 {
		return fmt.Errorf("%w: sendbuf: %d endpoints still use the shared buffers", netio.ErrNoResources, m.attached)
	}
	if err := m.pool.Close(); err != nil {
		return err
	}
	m.closed = true
	return nil
}
