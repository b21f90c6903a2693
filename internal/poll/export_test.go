package poll

import "time"

// WithClock returns c with the clock the poller measures its spin budget
// with replaced by now.
func WithClock(c Config, now func() time.Time) Config {
	c.now = now
	return c
}

// SchedPasses returns how often a locked poller passed through the
// scheduler (schedPass).
func SchedPasses(p *Poller) uint64 { return p.passes.Load() }

// SchedPassEvery is how often a locked poller passes through the scheduler.
const SchedPassEvery = schedPassEvery

// SchedPassCheck is how many loop rounds pass between a locked poller's
// clock reads for its passes.
const SchedPassCheck = schedPassCheck
