package pool

import (
	"errors"
	"fmt"
)

// Close stops the pool: later Gets fail with netio.ErrClosed (TryGet with
// netio.Closed), waiting Gets are woken with that error, and the free
// buffers are deregistered and unmapped at once. Leased buffers stay valid
// and are freed when their last handle is released. Close is idempotent.
func (p *Pool) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	if p.stop != nil {
		close(p.stop)
		<-p.done
	}
	p.waitMu.Lock()
	for _, w := range p.waiters {
		if w.state.CompareAndSwap(waitPending, waitClosed) {
			w.ch <- nil
		}
	}
	p.nwait.Add(-int32(len(p.waiters)))
	p.waiters = nil
	p.waitMu.Unlock()
	p.entry.Remove(nil)
	return p.sweep()
}

// sweep frees every free buffer of a closed pool.
func (p *Pool) sweep() error {
	var victims []*slot
	for _, t := range *p.tiers.Load() {
		t.mu.Lock()
		victims = append(victims, t.free...)
		victims = append(victims, t.extra...)
		t.count -= len(t.free) + len(t.extra)
		t.free, t.extra = nil, nil
		t.publish()
		t.mu.Unlock()
	}
	var errs []error
	for _, s := range victims {
		errs = append(errs, s.reg.Close())
		p.registered.Add(-int64(len(s.mem)))
		p.unmapRef(s.m)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool: close: %w", err)
	}
	return nil
}
