package poll

import (
	"golang.org/x/sys/unix"
)

// OnPollerGoroutine reports whether the caller runs on the poller goroutine,
// that is, inside one of its callbacks. It costs a few nanoseconds when
// FastGoroutineID (see goroutineID), so a send path may ask it then: a send
// made on the poller goroutine can be posted at once instead of through
// its run queue. Otherwise it costs about a microsecond.
func (p *Poller) OnPollerGoroutine() bool {
	id := p.goid.Load()
	return id != 0 && goroutineID() == id
}

// Do runs fn on the poller goroutine, between two batches, and returns when
// it has run. It runs fn at once when called on the poller goroutine, and
// on the caller's goroutine once the poller has stopped: after the
// functions queued before the stop have run, as it would have on the
// poller, never beside them. Use it to serialize state changes with
// callbacks. A nil fn does nothing.
func (p *Poller) Do(fn func()) {
	if fn == nil {
		return
	}
	if p.OnPollerGoroutine() {
		fn()
		return
	}
	ran := make(chan struct{})
	if !p.enqueue(func() { fn(); close(ran) }, false) {
		<-p.drained
		fn()
		return
	}
	<-ran
}

// Go queues fn to run on the poller goroutine, between two batches, and
// returns at once: the asynchronous Do, for work handed to the poller from
// a hot path. Once the queue has grown it does not allocate, provided fn is
// made once (a stored method value), not a new closure per call. Unlike Do
// it never runs fn on the caller's goroutine: once the poller has stopped it
// reports false and drops fn, so that work meant for the poller goroutine
// (which may call back into the caller's locks, or queue itself again) does
// not run elsewhere. A nil fn does nothing and reports true.
func (p *Poller) Go(fn func()) bool {
	return fn == nil || p.enqueue(fn, false)
}

// AtStop runs fn on the poller goroutine after it has stopped reading its
// queues and before it closes them, or, when it has stopped already, on
// the caller's goroutine once the functions queued before the stop have
// run (at once on the poller goroutine itself). Objects whose close must
// not race with queue reads (a passive endpoint: tcp in libfabric 1.17
// reads freed connection handles after fi_close of a listening endpoint)
// are closed here. A nil fn does nothing.
func (p *Poller) AtStop(fn func()) {
	if fn != nil && !p.enqueue(fn, true) {
		if !p.OnPollerGoroutine() {
			<-p.drained
		}
		fn()
	}
}

// enqueue appends fn to the run queue and wakes the poller, or with atStop
// to the functions run at its stop. It reports false, queuing nothing, once
// the poller has stopped.
func (p *Poller) enqueue(fn func(), atStop bool) bool {
	p.queueMu.Lock()
	defer p.queueMu.Unlock()
	if p.draining {
		return false
	}
	if atStop {
		p.atStop = append(p.atStop, fn)
	} else {
		p.queue = append(p.queue, fn)
		p.queued.Store(true)
		p.wakeLocked()
	}
	return true
}

// wakeLocked interrupts a blocked poller. queueMu must be held, so that the
// eventfd is not closed underneath. A poller outside block gets no write:
// it looks at the queue and at stopping before it blocks (see block), and
// a token left in the eventfd, which is read only after a poll, would end
// its next block at once, costing a second spin budget after a burst of
// queued work. (A write racing the start or end of a block can still leave
// one: an early wake-up, not a lost one.) It also keeps a system call off
// the hand-off path (endpoint.HandOffSize) while the poller spins.
func (p *Poller) wakeLocked() {
	if p.wakeFD < 0 || !p.sleeping.Load() {
		return
	}
	var one = [8]byte{1}
	_, _ = unix.Write(p.wakeFD, one[:])
}

// runQueue runs the queued functions. The queue's two halves take turns,
// so that Go does not allocate once both have grown.
func (p *Poller) runQueue() int {
	p.queueMu.Lock()
	queue := p.queue
	p.queue = p.spare[:0]
	p.queued.Store(false)
	p.queueMu.Unlock()
	for i, fn := range queue {
		fn()
		queue[i] = nil // let what fn holds go
	}
	p.spare = queue[:0]
	return len(queue)
}
