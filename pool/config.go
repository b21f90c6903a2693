package pool

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// maxTiers bounds the configured tiers; more than a few dozen tiers means a
// size multiple that is too small.
const maxTiers = 64

// Config describes a pool. Set either the single-tier layout (Size, Count)
// or the multi-tier layout (NumTiers, PerTier, FirstSize, SizeMultiple), not
// both.
type Config struct {
	// Access is what each registration allows. 0 selects domain.AccessSend:
	// registrations ask for the least access that works, so receive or RMA
	// pools must say so. Bits other than the domain.Access flags are
	// refused.
	Access domain.Access

	// Size is the buffer size of a single-tier pool, in bytes.
	Size int
	// Count is the number of buffers of a single-tier pool registered by
	// New. 0 starts the pool empty; GetOrExtend grows it.
	Count int

	// NumTiers is the number of tiers of a multi-tier pool.
	NumTiers int
	// PerTier is the number of buffers registered by New in each tier of a
	// multi-tier pool; 0 starts the tiers empty.
	PerTier int
	// FirstSize is the buffer size of the smallest tier, in bytes.
	FirstSize int
	// SizeMultiple is the factor between the sizes of neighbouring tiers:
	// tier t holds buffers of FirstSize × SizeMultiple^t bytes. At least 2.
	SizeMultiple int

	// Budget caps the bytes the pool keeps registered (leased and free
	// buffers, counted by their size). 0 means no cap beyond the domain's
	// limits.
	Budget int64
	// IdleTimeout is how long a buffer added above the configured counts may
	// sit free before it is deregistered and unmapped (shrinking the pool).
	// 0 disables shrinking. The check runs every IdleTimeout/4, so a buffer
	// goes after between IdleTimeout and 1.25 × IdleTimeout.
	IdleTimeout time.Duration

	// Allocator provides the memory behind the buffers. nil selects
	// MmapAllocator.
	Allocator Allocator
	// Logger receives growth failures, teardown errors and allocator notes.
	// The zero value logs nothing.
	Logger zerolog.Logger
}

// knownAccess is every access flag a registration may ask for.
const knownAccess = domain.AccessSend | domain.AccessRecv | domain.AccessRead | domain.AccessWrite |
	domain.AccessRemoteRead | domain.AccessRemoteWrite

// layout is a validated Config: the tier sizes and counts New registers.
type layout struct {
	sizes  []int
	counts []int
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: pool: "+format, append([]any{netio.ErrInvalidArgument}, args...)...)
}

// validate checks cfg and computes the tiers. Errors wrap
// netio.ErrInvalidArgument.
func (cfg *Config) validate() (layout, error) {
	var l layout
	single := cfg.Size != 0 || cfg.Count != 0
	multi := cfg.NumTiers != 0 || cfg.PerTier != 0 || cfg.FirstSize != 0 || cfg.SizeMultiple != 0
	switch {
	case single && multi:
		return l, invalid("set either Size/Count (single tier) or NumTiers/PerTier/FirstSize/SizeMultiple (multi-tier), not both")
	case !single && !multi:
		return l, invalid("no tiers: set Size (and Count) for a single tier, or NumTiers, FirstSize and SizeMultiple")
	case cfg.Budget < 0:
		return l, invalid("negative budget %d", cfg.Budget)
	case cfg.IdleTimeout < 0:
		return l, invalid("negative idle timeout %v", cfg.IdleTimeout)
	case cfg.Access&^knownAccess != 0:
		// Refused here, not by the first registration: a pool that starts
		// empty would otherwise fail only when it first grows.
		return l, invalid("unknown access bits %#x", uint64(cfg.Access&^knownAccess))
	}
	if single {
		if cfg.Size <= 0 || cfg.Size > netio.MaxBufferSize {
			return l, invalid("buffer size %d outside 1..%d", cfg.Size, netio.MaxBufferSize)
		}
		if cfg.Count < 0 || cfg.Count > netio.MaxBufferCount {
			return l, invalid("buffer count %d outside 0..%d", cfg.Count, netio.MaxBufferCount)
		}
		l.sizes, l.counts = []int{cfg.Size}, []int{cfg.Count}
	} else {
		switch {
		case cfg.NumTiers <= 0 || cfg.NumTiers > maxTiers:
			return l, invalid("tier count %d outside 1..%d", cfg.NumTiers, maxTiers)
		case cfg.PerTier < 0 || cfg.PerTier > netio.MaxBufferCount:
			return l, invalid("buffers per tier %d outside 0..%d", cfg.PerTier, netio.MaxBufferCount)
		case cfg.FirstSize <= 0 || cfg.FirstSize > netio.MaxBufferSize:
			return l, invalid("first tier size %d outside 1..%d", cfg.FirstSize, netio.MaxBufferSize)
		case cfg.SizeMultiple < 2:
			return l, invalid("size multiple %d below 2: tiers must differ in size", cfg.SizeMultiple)
		}
		size := cfg.FirstSize
		for t := range cfg.NumTiers {
			if t > 0 {
				if size > netio.MaxBufferSize/cfg.SizeMultiple {
					return l, invalid("tier %d would exceed %d bytes (%d × %d^%d)",
						t, netio.MaxBufferSize, cfg.FirstSize, cfg.SizeMultiple, t)
				}
				size *= cfg.SizeMultiple
			}
			l.sizes = append(l.sizes, size)
			l.counts = append(l.counts, cfg.PerTier)
		}
	}
	var total int64
	for i, s := range l.sizes {
		total += int64(s) * int64(l.counts[i])
	}
	if cfg.Budget > 0 && total > cfg.Budget {
		return l, invalid("the configured buffers need %d bytes, above the budget of %d", total, cfg.Budget)
	}
	return l, nil
}
