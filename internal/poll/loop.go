package poll

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"golang.org/x/sys/unix"
)

func (p *Poller) run() {
	if p.cfg.LockOSThread {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	p.goid.Store(goroutineID())
	defer p.finish()

	// idleSince is when the current run of empty rounds began (zero while
	// work comes in): it is read from the clock only when a round is
	// empty, never while completions flow.
	var idleSince time.Time
	var spin time.Duration // > 0: spin in C this long (the last round was empty, or did work: afterWork)
	var after afterWork    // whether to spin right after work
	spinAfter := p.cfg.Mode == BusyPoll || p.cfg.SpinBudget > 0
	budget := p.cfg.SpinBudget // stretched by work that came soon after a block
	blind := budget            // the budget after timed-out blocks on a queue without descriptor (blindBudget)
	blindBlock := false        // the last round timed out blocking on such a queue
	eqDue := true              // read the event queue in this round
	var pass *schedPass        // a locked poller's passes through the scheduler
	if p.cfg.LockOSThread {
		pass = &schedPass{now: p.cfg.now, last: p.cfg.now()}
	}
	sinceEQ := 0 // completions delivered since the last event queue read
	for iter := uint(1); !p.stopping.Load(); iter++ {
		if pass != nil && pass.round(iter) {
			p.passes.Add(1)
		}
		n := p.pollCQ(spin)
		after.done(n > 0)
		if blindBlock {
			blind, blindBlock = blindBudget(p.cfg.SpinBudget, blind, n > 0), false
			budget = blind
		}
		if sinceEQ += n; eqDue || iter%eqEvery == 0 || sinceEQ >= eqAfter {
			n += p.pollEQ()
			eqDue, sinceEQ = false, 0
		}
		if p.queued.Load() {
			n += p.runQueue()
		}
		if n > 0 {
			idleSince, spin = time.Time{}, 0
			if spinAfter {
				spin = after.spin()
			}
			continue
		}
		p.empty.Add(1)
		if p.cfg.Mode == BusyPoll {
			p.yield()
			spin = spinSlice
			continue
		}
		now := p.cfg.now()
		if idleSince.IsZero() {
			idleSince = now
		}
		if now.Sub(idleSince) < budget {
			p.yield()
			spin = spinSlice
			continue
		}
		spin = 0
		if p.pollEQ() > 0 {
			idleSince = time.Time{}
			continue
		}
		switch p.block() {
		case pending:
			p.yield() // something is pending: look again, but let others run
		case ready:
			p.wakeups.Add(1)
			// A queue's descriptor woke us: traffic (or a Do) again, so a
			// fresh spin budget, as after a completion, stretched if the
			// work came soon. Read the event queue in the next round, in
			// case it was that one.
			budget = stretchedBudget(p.cfg.SpinBudget, p.cfg.now().Sub(idleSince))
			idleSince, eqDue = time.Time{}, true
		case timedOut:
			p.timeouts.Add(1)
			// idleSince stays as it was: a wake-up that brings nothing (the
			// MaxBlock timeout) leads straight back to blocking, not to
			// another spin budget, so an idle poller costs no CPU.
			budget, eqDue = p.cfg.SpinBudget, true
			blindBlock = !p.canWait
		}
	}
}

// stretchedBudget returns the spin budget after work woke the poller from a
// block, gap after its last work: twice the gap, at least base and at most
// StretchLimit × base. A gap beyond that limit means work comes too seldom
// to spin for, and base is returned; so is a base that blocks at once.
func stretchedBudget(base, gap time.Duration) time.Duration {
	if base <= 0 || gap > StretchLimit*base {
		return base
	}
	return min(max(2*gap, base), StretchLimit*base)
}

// finish runs queued functions one last time, then closes the queues.
func (p *Poller) finish() {
	p.queueMu.Lock()
	queue, atStop := p.queue, p.atStop
	p.queue, p.atStop = nil, nil
	p.draining = true // later Do and AtStop calls run inline, once these have run
	p.queueMu.Unlock()
	for _, fn := range queue {
		fn()
	}
	for _, fn := range atStop {
		fn()
	}
	close(p.drained)
	p.goid.Store(0)
	err := p.closeQueues()
	p.queueMu.Lock()
	p.closeWakeFD()
	p.closeErr = err
	close(p.done)
	p.queueMu.Unlock()
	if p.cfg.OnStopped != nil {
		p.cfg.OnStopped()
	}
}

func (p *Poller) closeWakeFD() {
	if p.wakeFD >= 0 {
		_ = unix.Close(p.wakeFD)
		p.wakeFD = -1
	}
}

func (p *Poller) closeQueues() error {
	var errs []error
	if err := p.cq.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cq: %w (endpoints still bound?)", err))
	}
	if err := p.eq.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cq: %w", err))
	}
	return errors.Join(errs...)
}

// pollCQ reads and dispatches completions until the queue is empty or a
// bounded number of batches was read, so that events and queued work are
// not starved.
func (p *Poller) pollCQ(spin time.Duration) int {
	total := 0
	for i := range 16 {
		n, res := p.readOnce(i == 0, spin)
		total += n
		switch res {
		case readEmpty, readShort:
			p.cqEmptied++
			return total
		case readFailed:
			return total
		}
	}
	return total
}

// readResult says what one read of the completion queue found.
type readResult uint8

const (
	readFull   readResult = iota // a full batch: more may wait
	readShort                    // less than a full batch, or an error completion may stop it (see readOnce)
	readError                    // one error completion: more may wait behind it
	readEmpty                    // nothing: the queue was empty
	readFailed                   // the read itself failed
)

// readOnce reads one batch of completions, or one error completion, and
// dispatches it. A short batch usually means the queue is empty now, but
// not always: fi_cq_read stops before an error completion, so the error
// and whatever follows it may still wait (see ReadOut).
func (p *Poller) readOnce(first bool, spin time.Duration) (int, readResult) {
	n, avail, errno := p.readCQ(first, spin)
	p.delivering = true // a callback's ReadOut must not read over this batch
	n, res := p.dispatchRead(n, avail, errno)
	p.delivering = false
	return n, res
}

// dispatchRead dispatches what a read returned (see readOnce).
func (p *Poller) dispatchRead(n int, avail bool, errno fabric.Errno) (int, readResult) {
	p.unposted()
	switch {
	case errno != 0:
		p.log.Error().Err(errno).Msg("cq: read failed")
		time.Sleep(errorBackoff) // do not spin on a broken queue
		return 0, readFailed
	case avail:
		p.dispatchError()
		return 1, readError
	case n == 0:
		return 0, readEmpty
	}
	p.dispatchBatch(n)
	if n < fabric.MaxBatch {
		return n, readShort
	}
	return n, readFull
}

// dispatchBatch hands the n completions just read to their owners.
func (p *Poller) dispatchBatch(n int) {
	owners := *p.owners.Load()
	start := p.batchStart()
	for i := range n {
		p.lastOfBatch = i == n-1
		c := p.cq.Entry(i)
		h, ok := owners.find(uint32(c.Context >> 32))
		if !ok {
			p.dropped.Add(1)
			continue
		}
		h.HandleCompletion(uint32(c.Context), Result{Status: netio.OK, Flags: c.Flags, Len: int(c.Len), Source: c.Source})
	}
	p.lastOfBatch = false
	p.batchEnd(start)
	p.completions.Add(uint64(n))
}

// readCQ reads one batch; the first of a round after an empty round spins
// in C for up to spin while the queue stays empty.
func (p *Poller) readCQ(first bool, spin time.Duration) (int, bool, fabric.Errno) {
	if first && spin > 0 {
		return p.cq.ReadSpin(spin)
	}
	return p.cq.Read()
}

func (p *Poller) dispatchError() {
	ce, ok := p.cq.ReadError()
	if !ok {
		return
	}
	if uint32(ce.Context) == UnreportedKey {
		p.unreported.Add(1)
		return
	}
	st := netio.Failed
	if ce.Errno == fabric.ECANCELED {
		st = netio.Canceled
	}
	p.lastOfBatch = true // read alone; a repost waits for the next read, which comes before any block
	p.handTo(ce.Context, Result{Status: st, Errno: ce.Errno, Flags: ce.Flags, Len: int(ce.Len)}, &p.errs)
	p.lastOfBatch = false
}

func (p *Poller) pollEQ() int {
	n := 0
	for ; n < 16; n++ {
		ev, ok, err := p.eq.Read()
		if err != nil {
			p.log.Error().Err(err).Msg("cq: event queue read failed")
			time.Sleep(errorBackoff)
			return n
		}
		if !ok {
			return n
		}
		h, found := p.owners.Load().find(uint32(ev.Context >> 32))
		if !found {
			p.dropped.Add(1)
			ev.Info.Free()
			continue
		}
		p.events.Add(1)
		h.HandleEvent(ev)
	}
	return n
}

// wakeReason is how block returned.
type wakeReason uint8

const (
	pending  wakeReason = iota // queued work, stopping or fi_trywait: no wait
	ready                      // a file descriptor became ready
	timedOut                   // MaxBlock passed (or the wait failed)
)

// block waits on the CQ, EQ and wake file descriptors, once the run queue
// is empty, the poller is not stopping and fi_trywait has confirmed that
// nothing is pending, and says why it returned.
//
// It sets sleeping before it looks at the run queue and at stopping, and
// enqueue and Close set those before they look at sleeping (wakeLocked):
// with sequentially consistent atomics one side sees the other, so work
// queued meanwhile is either seen here or wakes the poll.
func (p *Poller) block() wakeReason {
	p.sleeping.Store(true)
	defer p.sleeping.Store(false)
	if p.queued.Load() || p.stopping.Load() || p.cq.QueuedRecvs() > 0 || p.canWait && !p.fab.TryWait(p.cq, p.eq) {
		return pending // receives queued by Repost are posted by the next read, never left while blocked
	}
	p.sleeps.Add(1)
	n, err := unix.Poll(p.pollFDs, p.blockMS)
	if err != nil && err != unix.EINTR {
		p.log.Error().Err(err).Msg("cq: poll failed")
		time.Sleep(errorBackoff)
		return timedOut
	}
	if p.pollFDs[0].Revents != 0 {
		var buf [8]byte
		_, _ = unix.Read(p.wakeFD, buf[:])
	}
	if n > 0 {
		return ready
	}
	// Without the queues' descriptors (canWait false) the short timeout
	// is the only wake-up traffic gets: the next round reads the queues
	// once, and spins again only if they had something.
	return timedOut
}

// yield lets others run between empty polls: runtime.Gosched the
// application's goroutines (a spinning poller holds one of GOMAXPROCS
// slots; on two cores two pollers would leave the sender none), and
// sched_yield the provider's own threads (the sockets progress thread) and
// the peer's poller when both share a core on a loaded machine. A poller
// locked to its thread skips Gosched, which would hand the thread over
// (see cq.Config.LockOSThread); it passes through the scheduler once
// every schedPassEvery instead (schedpass.go).
func (p *Poller) yield() {
	if !p.cfg.LockOSThread {
		runtime.Gosched()
	}
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
