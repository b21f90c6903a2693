package pool

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/stats"
)

// cacheLine pads the hot fields of tiers and the pool apart.
const cacheLine = domain.CacheLine

// Pool is a set of registered buffers in tiers of equal size. It is safe
// for concurrent use.
type Pool struct {
	// Read on every call; written rarely.
	tiers  atomic.Pointer[[]*tier] // sorted by size; replaced when a tier is added
	closed atomic.Bool
	nwait  atomic.Int32 // waiters queued
	epoch  atomic.Int64 // shrink ticks so far
	_      [cacheLine]byte

	mgr    *domain.Manager
	access domain.Access
	budget int64
	idle   time.Duration
	alloc  Allocator
	log    zerolog.Logger

	growMu     sync.Mutex // serialises growth: budget check and tier creation
	registered atomic.Int64
	peak       atomic.Int64 // written under growMu
	mapped     atomic.Int64

	waitMu  sync.Mutex
	waiters []*waiter // FIFO

	closeMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}

	entry *stats.Entry // the pool in its manager's stats.Registry
}

// New registers the configured buffers in mgr and returns the pool. When
// any of them cannot be allocated or registered, New frees what it made and
// returns the error (wrapping netio.ErrNoResources for a limit). Config
// errors wrap netio.ErrInvalidArgument. Close the pool when done: with an
// IdleTimeout it runs a goroutine until then.
func New(mgr *domain.Manager, cfg Config) (*Pool, error) {
	if mgr == nil {
		return nil, invalid("nil domain manager")
	}
	l, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Pool{mgr: mgr, access: cfg.Access, budget: cfg.Budget, idle: cfg.IdleTimeout,
		alloc: cfg.Allocator, log: mgr.Logger(cfg.Logger)}
	if p.access == 0 {
		p.access = domain.AccessSend
	}
	if p.alloc == nil {
		p.alloc = MmapAllocator{}
	}
	if h, ok := p.alloc.(*HugePageAllocator); ok {
		h.bind(cfg.Logger)
	}
	ts := make([]*tier, len(l.sizes))
	for i, size := range l.sizes {
		t := &tier{p: p, size: size, base: l.counts[i]}
		ts[i] = t
		if err := p.fill(t, l.counts[i]); err != nil {
			made := ts[:i+1]
			p.tiers.Store(&made)
			p.closed.Store(true)
			_ = p.sweep()
			return nil, err
		}
	}
	p.tiers.Store(&ts)
	p.peak.Store(p.registered.Load())
	if p.idle > 0 {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.shrinker()
	}
	p.entry = mgr.Registry().AddPool(p.fillStats)
	return p, nil
}

// Access returns the access every buffer of the pool is registered with.
func (p *Pool) Access() domain.Access { return p.access }

// Domain returns the Manager the pool registers its buffers in.
func (p *Pool) Domain() *domain.Manager { return p.mgr }

// MaxBufferSize returns the size of the largest tier (0 when there is none).
// It grows when GetOrExtend adds a tier.
func (p *Pool) MaxBufferSize() int {
	ts := *p.tiers.Load()
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1].size
}
