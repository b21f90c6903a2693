package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio"
)

// Waiting for room (WaitRoom): whatever answered NoResources marks itself
// refused, a Block session (its pending slot or queued post) or the
// publisher's own pool (Shared buffers, ZeroCopy publishes in flight).
// While some caller waits (roomWait.armed), the completion path of a
// marked source asks whether it has room for a batch again, half of what
// it holds in flight, and then clears its mark and wakes the waiters once;
// with nobody waiting it only loads armed. The housekeeping tick clears a
// mark whose source has some room that did not grow over a whole tick, so
// a waiter whose batch never comes (sends held by a stalled subscriber)
// still wakes, while one whose batch is on its way is not woken early.

// ErrWaitOnPoller is WaitRoom's error when called on the publisher's
// poller goroutine (from a callback such as OnPublishCompleted): the
// completions it would wait for run there.
var ErrWaitOnPoller = errors.New("pubsub: WaitRoom called on the poller goroutine")

// errRoomClosed is WaitRoom's error after Close, made once: a wait does
// not allocate.
var errRoomClosed = fmt.Errorf("pubsub: WaitRoom: %w", netio.ErrClosed)

// roomWait is a publisher's WaitRoom callers, each on a channel of its
// own, and the pool's refusal mark.
type roomWait struct {
	armed    atomic.Int32 // WaitRoom calls in progress
	pool     atomic.Bool  // the pool (Shared buffers, ZeroCopy publishes) refused
	tickFree int          // the pool's free entries at the last housekeeping tick

	mu    sync.Mutex
	chans []chan struct{} // one per call in progress
	spare []chan struct{} // of calls that ended, for the next ones

	// sleeps counts the calls' sleeps; wakes the wakes of a source that
	// has room for a batch again or whose refusal ended; tickWakes the
	// refusals the housekeeping tick let go.
	sleeps, wakes, tickWakes atomic.Uint64
}

// enter registers a call: its channel gets a token at each wake from now.
func (r *roomWait) enter() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ch chan struct{}
	if n := len(r.spare); n > 0 {
		ch, r.spare = r.spare[n-1], r.spare[:n-1]
	} else {
		ch = make(chan struct{}, 1)
	}
	r.chans = append(r.chans, ch)
	r.armed.Add(1)
	return ch
}

// leave unregisters the call of ch and keeps ch, emptied, for another.
func (r *roomWait) leave(ch chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.chans {
		if c == ch {
			last := len(r.chans) - 1
			r.chans[i], r.chans[last] = r.chans[last], nil
			r.chans = r.chans[:last]
			break
		}
	}
	r.armed.Add(-1)
	select {
	case <-ch:
	default:
	}
	r.spare = append(r.spare, ch)
}

// clear clears mark if it is set and gives every waiting call a token (a
// call that has one keeps one), counting the wake in count (nil: a
// caller's own check, not counted).
func (r *roomWait) clear(mark *atomic.Bool, count *atomic.Uint64) {
	if !mark.CompareAndSwap(true, false) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ch := range r.chans {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	if count != nil {
		count.Add(1)
	}
}

// WaitRoom waits until a Publish (or PublishZeroCopy) that answered
// NoResources may take a message again, and returns nil; or ctx ends
// (its cause), or the publisher closes (an error matching
// netio.ErrClosed). The retry rule: on NoResources, call WaitRoom, then
// Publish the same message again; if that answers NoResources once more
// (another subscriber, or another goroutine took the room first), wait
// again. It returns at once when nothing refused since the last room
// came back.
//
// It waits without polling: the subscriber (or the publisher's pool of
// Shared buffers or ZeroCopy publishes) that refused wakes it once from
// its send completions, when it has room for a batch again, half of what
// it holds in flight (Send.BufferCount buffers, MaxInFlight in ZeroCopy
// mode), so the caller refills a batch per wake instead of one buffer per
// completion. A subscriber that unsubscribes or leaves (its refusal no
// longer applies) and Close wake it too; a refusal whose batch does not
// come (some room, then no completion over a whole housekeeping tick of 5
// ms: sends held by a stalled subscriber) is let go on the tick. While no
// caller waits the completions only load a flag: Publish pays nothing for
// it. Any number of goroutines may wait at once; it does not allocate in
// steady state. Called on the poller goroutine (from a callback) it
// returns ErrWaitOnPoller.
func (p *Publisher) WaitRoom(ctx context.Context) error {
	if p.isClosed.Load() {
		return errRoomClosed
	}
	if p.poller.OnPollerGoroutine() {
		return ErrWaitOnPoller
	}
	ch := p.room.enter()
	defer p.room.leave(ch)
	for p.refusalStands() {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		p.room.sleeps.Add(1)
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-p.stop:
			return errRoomClosed
		}
	}
	if p.isClosed.Load() {
		return errRoomClosed
	}
	return nil
}

// refusalStands reports whether a refusal still stands: a marked source
// without room for a batch. Marks whose room came back are cleared.
func (p *Publisher) refusalStands() bool {
	stands := false
	if p.room.pool.Load() {
		if free, low := p.poolRoom(); free >= max(low, 1) {
			p.room.clear(&p.room.pool, nil)
		} else {
			stands = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ss := range p.sessions {
		if !ss.refused.Load() {
			continue
		}
		if ss.roomy(ss.roomLow) {
			p.room.clear(&ss.refused, nil)
		} else {
			stands = true
		}
	}
	return stands
}

// poolRoom returns the free entries of the publisher's pool (Shared
// buffers, ZeroCopy publishes) and the batch a waiter is woken for, half
// of them.
func (p *Publisher) poolRoom() (free, low int) {
	switch {
	case p.sh != nil:
		return len(p.sh.free), p.cfg.Send.BufferCount / 2
	case p.zcFree != nil:
		return len(p.zcFree), p.cfg.MaxInFlight / 2
	}
	return 0, 0
}

// poolFreed runs after an entry went back to the pool: it wakes the
// waiters when the pool refused and has a batch free again.
func (p *Publisher) poolFreed() {
	if p.room.armed.Load() == 0 || !p.room.pool.Load() {
		return
	}
	if free, low := p.poolRoom(); free >= max(low, 1) {
		p.room.clear(&p.room.pool, &p.room.wakes)
	}
}

// markRefused marks ss as the Block subscriber that made Publish answer
// NoResources. ss.mu is held.
func (ss *pubSession) markRefused() { ss.refused.Store(true) }

// roomy reports whether ss has nothing pending and at least low sends'
// room in its connection. ss.refused was seen set (so hello is done).
func (ss *pubSession) roomy(low int) bool {
	return !ss.pending.Load() && (low <= 0 || ss.free() >= low)
}

// free returns the sends ss's connection has room for now: its free
// header slots (Shared, ZeroCopy) or send buffers. Hello is done.
func (ss *pubSession) free() int {
	if ss.zep != nil {
		return ss.zep.FreeHeaders()
	}
	return ss.ep.FreeBuffers()
}

// noteRoom runs after ss's send completed (and its pending slot or queue
// was retried): when ss refused and a caller waits, it wakes the waiters
// once ss has room for a batch.
func (ss *pubSession) noteRoom() {
	if ss.p.room.armed.Load() == 0 || !ss.refused.Load() || !ss.roomy(ss.roomLow) {
		return
	}
	ss.p.room.clear(&ss.refused, &ss.p.room.wakes)
}

// letGo clears ss's refusal, waking the waiters, when it no longer
// applies (a subscription of ss ended).
func (ss *pubSession) letGo() {
	if ss.refused.Load() {
		ss.p.room.clear(&ss.refused, &ss.p.room.wakes)
	}
}

// roomTick runs on the housekeeping tick while a caller waits: a refusal
// whose source has some room (nothing pending), and no more than at the
// previous tick, is let go, so a batch that does not come (its sends held
// by a stalled subscriber) does not hold a waiter. sessions is the tick's
// list; tickFree fields are the housekeeping goroutine's own.
func (p *Publisher) roomTick(sessions []*pubSession) {
	if p.room.armed.Load() == 0 {
		return
	}
	if p.room.pool.Load() {
		free, _ := p.poolRoom()
		if free > 0 && free <= p.room.tickFree {
			p.room.clear(&p.room.pool, &p.room.tickWakes)
		}
		p.room.tickFree = free
	}
	for _, ss := range sessions {
		if !ss.refused.Load() || !ss.roomy(0) {
			continue
		}
		free := ss.free()
		if free <= ss.tickFree {
			p.room.clear(&ss.refused, &p.room.tickWakes)
		}
		ss.tickFree = free
	}
}
