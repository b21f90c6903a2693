package pool

import (
	"slices"
	"time"
)

// idleTicks is the number of shrink ticks (IdleTimeout/4 each) a buffer must
// have been free for: a buffer freed just before a tick is eligible after
// 4 full periods, one freed just after it after 5.
const idleTicks = 5

// shrinker advances the idle epoch every IdleTimeout/4 and frees extra
// buffers that have been free for idleTicks epochs.
func (p *Pool) shrinker() {
	defer close(p.done)
	period := max(p.idle/(idleTicks-1), time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			e := p.epoch.Add(1)
			p.shrink(e - idleTicks)
		}
	}
}

// shrink frees the extra buffers freed at or before epoch.
func (p *Pool) shrink(epoch int64) {
	var victims []*slot
	for _, t := range *p.tiers.Load() {
		t.mu.Lock()
		// extra is in release order, oldest first.
		n := 0
		for n < len(t.extra) && t.extra[n].freedAt <= epoch {
			n++
		}
		if n > 0 {
			victims = append(victims, t.extra[:n]...)
			t.extra = slices.Delete(t.extra, 0, n)
			t.count -= n
			t.minFree = min(t.minFree, len(t.free)+len(t.extra))
			t.publish()
		}
		t.mu.Unlock()
	}
	for _, s := range victims {
		p.destroy(s)
	}
	if len(victims) > 0 {
		p.log.Debug().Int("buffers", len(victims)).Int64("registered", p.registered.Load()).Msg("pool: shrunk idle buffers")
	}
}
