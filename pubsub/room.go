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
// publisher's own pool (Shared buffers, ZeroCopy publishes in flight); a
// tag the pool refused records which pool refusal it was. A call for a
// tag waits on the marked Block sessions of that tag's subscribers and on
// the pool when the pool's current refusal refused that tag. While some
// caller waits (roomWait.armed), the completion path of a marked source
// asks whether it has room for a batch again, half of what it holds in
// flight, and then clears its mark and wakes the waiters once; with
// nobody waiting it only loads armed. The housekeeping tick clears a mark
// whose source has some room that did not grow over a whole tick of the
// same refusal, so a waiter whose batch never comes (sends held by a
// stalled subscriber) still wakes, while one whose batch is on its way is
// not woken early.

// ErrWaitOnPoller is WaitRoom's error when called on the publisher's
// poller goroutine (from a callback such as OnPublishCompleted): the
// completions it would wait for run there.
var ErrWaitOnPoller = errors.New("pubsub: WaitRoom called on the poller goroutine")

// errRoomClosed is WaitRoom's error after Close, made once: a wait does
// not allocate.
var errRoomClosed = fmt.Errorf("pubsub: WaitRoom: %w", netio.ErrClosed)

// errRoomTag is WaitRoom's error for a tag not served.
var errRoomTag = fmt.Errorf("pubsub: WaitRoom: %w: tag not served", netio.ErrInvalidArgument)

// roomWait is a publisher's WaitRoom callers, each on a channel of its
// own, and the pool's refusal mark.
type roomWait struct {
	armed atomic.Int32 // WaitRoom calls in progress
	pool  refusal      // the pool (Shared buffers, ZeroCopy publishes) refused

	mu    sync.Mutex
	chans []chan struct{} // one per call in progress
	spare []chan struct{} // of calls that ended, for the next ones

	// sleeps counts the calls' sleeps; wakes the wakes of a source that
	// has room for a batch again or whose refusal ended; tickWakes the
	// refusals the housekeeping tick let go.
	sleeps, wakes, tickWakes atomic.Uint64
}

// refusal is the mark of a source that made Publish answer NoResources.
type refusal struct {
	set atomic.Bool
	// gen counts the refusals begun: a tag the pool refused records the
	// pool's gen, and waits on the pool only while that refusal stands.
	gen atomic.Uint64
	// tickFree is the source's room at the last housekeeping tick of this
	// refusal, -1 when none saw it yet: reset whenever the mark is set or
	// cleared, so a let-go compares two ticks of one refusal.
	tickFree atomic.Int64
}

// mark sets r if it is not set, as a new refusal.
func (r *refusal) mark() {
	if r.set.Load() {
		return
	}
	r.tickFree.Store(-1) // before set: a tick that sees set sees -1
	r.gen.Add(1)
	r.set.Store(true)
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
func (r *roomWait) clear(mark *refusal, count *atomic.Uint64) {
	if !mark.set.CompareAndSwap(true, false) {
		return
	}
	mark.tickFree.Store(-1)
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

// WaitRoom waits until a Publish (or PublishZeroCopy) of tag that
// answered NoResources may take a message again, and returns nil; or ctx
// ends (its cause), or the publisher closes (an error matching
// netio.ErrClosed). The retry rule: on NoResources, call WaitRoom with the
// same tag, then Publish the same message again; if that answers
// NoResources once more (another subscriber, or another goroutine took the
// room first), wait again. It returns at once when nothing that refused
// tag since the last room came back still refuses it: a subscriber
// refusing only other tags does not hold it. A tag not served is refused
// with an error matching netio.ErrInvalidArgument.
//
// It waits without polling: each Block subscriber of tag that refused
// (and the publisher's pool of Shared buffers or ZeroCopy publishes, when
// it refused tag) wakes it once from its send completions, when it has
// room for a batch again, half of what it holds in flight
// (Send.BufferCount buffers, MaxInFlight in ZeroCopy mode), so the caller
// refills a batch per wake instead of one buffer per completion. A
// subscriber that unsubscribes or leaves (its refusal no longer applies)
// and Close wake it too; a refusal whose batch does not come (some room,
// then no completion over a whole housekeeping tick of 5 ms: sends held by
// a stalled subscriber) is let go on the tick. It waits as long as Publish
// would refuse, which is for good while a Block subscriber of tag stops
// reading with a message waiting for it: pass a ctx with a deadline.
// While no caller waits the completions only load a flag: Publish pays
// nothing for it. Any number of goroutines may wait at once; it does not
// allocate in steady state. It must not be called from any publisher
// callback (OnPublishCompleted may run on the poller or on a session's
// control goroutine, whose progress it may wait for); on the poller
// goroutine it returns ErrWaitOnPoller.
func (p *Publisher) WaitRoom(ctx context.Context, tag uint64) error {
	if p.isClosed.Load() {
		return errRoomClosed
	}
	ts := (*p.tags.Load())[tag]
	if ts == nil {
		return errRoomTag
	}
	if p.poller.OnPollerGoroutine() {
		return ErrWaitOnPoller
	}
	ch := p.room.enter()
	defer p.room.leave(ch)
	for p.refusalStands(ts) {
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

// refusalStands reports whether a refusal of ts still stands: the pool's,
// if it refused ts, or that of a marked Block subscriber of ts, without
// room for a batch. Marks whose room came back are cleared.
func (p *Publisher) refusalStands(ts *tagState) bool {
	stands := p.poolRefuses(ts)
	ts.mu.Lock()
	subs := ts.subs // replaced, never changed in place, when subscribers change
	ts.mu.Unlock()
	for _, s := range subs {
		ss := s.sess
		if ss.policy != Block || !ss.refused.set.Load() {
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

// poolRefuses reports whether the pool's refusal that refused ts stands:
// it is still marked and has room for less than a batch (else the mark
// is cleared).
func (p *Publisher) poolRefuses(ts *tagState) bool {
	pool := &p.room.pool
	if !pool.set.Load() || ts.poolGen.Load() != pool.gen.Load() {
		return false
	}
	if p.poolHasBatch() {
		p.room.clear(pool, nil)
		return false
	}
	return true
}

// refusePool marks the pool refused, for ts: it had no entry free for a
// message of ts.
func (p *Publisher) refusePool(ts *tagState) {
	p.room.pool.mark()
	ts.poolGen.Store(p.room.pool.gen.Load())
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
	if p.room.armed.Load() == 0 || !p.room.pool.set.Load() {
		return
	}
	if p.poolHasBatch() {
		p.room.clear(&p.room.pool, &p.room.wakes)
	}
}

// poolHasBatch reports whether the pool has room for a waiter's batch
// again (at least one entry).
func (p *Publisher) poolHasBatch() bool {
	free, low := p.poolRoom()
	return free >= max(low, 1)
}

// markRefused marks ss as the Block subscriber that made Publish answer
// NoResources. ss.mu is held.
func (ss *pubSession) markRefused() { ss.refused.mark() }

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
	if ss.p.room.armed.Load() == 0 || !ss.refused.set.Load() || !ss.roomy(ss.roomLow) {
		return
	}
	ss.p.room.clear(&ss.refused, &ss.p.room.wakes)
}

// letGo clears ss's refusal, waking the waiters, when it no longer
// applies (a subscription of ss ended).
func (ss *pubSession) letGo() {
	if ss.refused.set.Load() {
		ss.p.room.clear(&ss.refused, &ss.p.room.wakes)
	}
}

// roomTick runs on the housekeeping tick while a caller waits: a refusal
// whose source has some room (nothing pending), and no more than at the
// previous tick of the same refusal, is let go, so a batch that does not
// come (its sends held by a stalled subscriber) does not hold a waiter.
// sessions is the tick's list.
func (p *Publisher) roomTick(sessions []*pubSession) {
	if p.room.armed.Load() == 0 {
		return
	}
	if p.room.pool.set.Load() {
		free, _ := p.poolRoom()
		p.room.tick(&p.room.pool, free, free > 0)
	}
	for _, ss := range sessions {
		if ss.refused.set.Load() {
			p.room.tick(&ss.refused, ss.free(), !ss.pending.Load())
		}
	}
}

// tick lets r go, waking the waiters, when its source has room (some) and
// free, its room now, is no more than at the previous tick of the same
// refusal; otherwise it records free for the next tick, unless the mark
// was set or cleared meanwhile.
func (r *roomWait) tick(mark *refusal, free int, some bool) {
	prev := mark.tickFree.Load()
	if some && prev >= 0 && int64(free) <= prev {
		r.clear(mark, &r.tickWakes)
		return
	}
	mark.tickFree.CompareAndSwap(prev, int64(free))
}
