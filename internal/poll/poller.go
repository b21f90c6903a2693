// Package poll is the completion poller behind package cq: one goroutine
// per completion queue that reads completions in batches, maps each back to
// the owner and key it was posted with, delivers error completions as keyed
// failures, reads the event queue of the endpoints bound to it, and runs
// work handed to it (Do, Go, AtStop).
//
// The endpoint packages register handlers and post with their owners'
// contexts; users see only cq.Poller, which cannot register, post or
// unregister, so they cannot corrupt the routing of completions.
//
// A Poller spins for a budget after the last completion, then blocks on
// the queues' file descriptors (after fi_trywait), so an idle process uses
// no CPU; work that comes back soon after a block stretches the budget
// (cq.Config.SpinBudget). It spins inside C, in slices of a few
// microseconds between which it reads the event queue, runs queued work
// and yields, so that an empty poll costs what it costs a C program.
package poll

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Of returns the poller behind a *cq.Poller (nil for a nil one). Package
// cq installs it when it is initialized: cq imports this package, so this
// one cannot name cq's type, and the endpoint packages reach the poller a
// user shares through it.
var Of func(public any) *Poller

// Stats counts what a Poller did.
type Stats struct {
	Completions uint64 // successful completions delivered
	Errors      uint64 // error completions delivered
	Events      uint64 // connection events delivered
	Dropped     uint64 // completions or events whose owner was gone
	Unreported  uint64 // error completions of operations posted under UnreportedKey
	Sleeps      uint64 // times the poller blocked on its file descriptors
	EmptyPolls  uint64 // rounds that found nothing to do: the CPU spent spinning
	WakeUps     uint64 // blocks ended by a ready descriptor (traffic, or work handed over)
	Timeouts    uint64 // blocks ended by MaxBlock
	// CallbackTime is the time spent delivering a batch of completions
	// to their owners (the callbacks that run on the poller goroutine),
	// for one batch in CallbackSample.
	CallbackTime Histogram
}

// Poller owns a completion queue and an event queue and the goroutine that
// reads them. Endpoints bind to CQ() and EQ().
type Poller struct {
	cfg Config
	fab *fabric.Fabric
	cq  *fabric.CQ
	eq  *fabric.EQ
	log zerolog.Logger

	pollFDs []unix.PollFd // CQ, EQ, wake eventfd (Adaptive only)
	wakeFD  int
	blockMS int  // cfg.MaxBlock as a poll timeout (noWaitBlockMS at most without canWait)
	canWait bool // the CQ and EQ have descriptors to block on

	regMu  sync.Mutex
	nextID uint32
	owners atomic.Pointer[ownerTable]

	queueMu  sync.Mutex // guards queue, atStop, draining and wakeFD
	queue    []func()
	spare    []func() // poller goroutine only: the queue's other half, reused
	atStop   []func()
	queued   atomic.Bool
	draining bool
	// drained is closed once finish has run the functions queued before
	// the stop; a Do or AtStop from another goroutine that comes during
	// the drain waits for it, so that it never runs beside them.
	drained chan struct{}

	stopping  atomic.Bool
	sleeping  atomic.Bool // the poller is in block: Go, Do and Close must wake it
	done      chan struct{}
	goid      atomic.Uint64 // the poller goroutine's ID while it runs
	closeOnce sync.Once
	closeErr  error

	completions, errs, events, dropped, sleeps, empty atomic.Uint64
	passes                                            atomic.Uint64 // a locked poller's passes through the scheduler (schedPass)
	unreported                                        atomic.Uint64 // see UnreportedKey
	wakeups, timeouts                                 atomic.Uint64
	callbacks                                         histogram
	batches                                           uint32 // poller goroutine only: batches delivered, for sampling
	cqEmptied                                         uint64 // poller goroutine only: see CQEmptied
	lastOfBatch                                       bool   // poller goroutine only: the completion being delivered ends its batch (Repost)
	delivering                                        bool   // poller goroutine only: completions of a read are being dispatched (ReadOut)
}

// CQEmptied counts the completion-queue reads that left the queue empty (a
// read that returned less than a full batch). The queue is read in order,
// so once the count has moved past a value taken earlier, every completion
// the provider had written before that moment has been delivered, with
// one exception: fi_cq_read stops before an error completion, so a short
// read can leave the error and what follows it (ReadOut reads past them).
// A connection that drains after its peer's shutdown ends only then: on
// tcp its last messages are written before the shutdown, but may still
// wait behind a backlog. Poller goroutine only (a callback, Do or Go).
func (p *Poller) CQEmptied() uint64 { return p.cqEmptied }

// Open opens a completion queue and an event queue on the domain and starts
// the poller goroutine. Close stops it and closes both queues. A nil fabric
// or domain is an error matching netio.ErrInvalidArgument, a closed one an
// error matching netio.ErrClosed.
func Open(fab *fabric.Fabric, dom *fabric.Domain, cfg Config) (*Poller, error) {
	if fab == nil || dom == nil {
		return nil, fmt.Errorf("%w: cq: nil fabric or domain", netio.ErrInvalidArgument)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	wait := cfg.Mode == Adaptive
	p := &Poller{cfg: cfg, fab: fab, log: cfg.Logger, wakeFD: -1, blockMS: pollTimeout(cfg.MaxBlock), done: make(chan struct{}), drained: make(chan struct{})}
	p.owners.Store(&ownerTable{})
	cqWait := wait && !cfg.NoCQWait
	if p.cq, err = dom.OpenCQ(cfg.Size, cqWait); cqWait && errors.Is(err, fabric.ENOSYS) {
		p.cq, err = dom.OpenCQ(cfg.Size, false) // shm: no wait objects
	}
	if err != nil {
		return nil, openError(err)
	}
	if p.eq, err = fab.OpenEQ(DefaultEQSize, wait); wait && errors.Is(err, fabric.ENOSYS) {
		p.eq, err = fab.OpenEQ(DefaultEQSize, false)
	}
	if err != nil {
		_ = p.cq.Close()
		return nil, openError(err)
	}
	if wait {
		if err = p.openWaitFDs(); err != nil {
			p.closeQueues()
			p.closeWakeFD()
			return nil, err
		}
	}
	go p.run()
	return p, nil
}

// openError wraps an error of opening a queue; a closed fabric or domain
// (fabric.EBADF) also matches netio.ErrClosed.
func openError(err error) error {
	if errors.Is(err, fabric.EBADF) {
		return fmt.Errorf("cq: %w: %w", netio.ErrClosed, err)
	}
	return fmt.Errorf("cq: %w", err)
}

// pollTimeout turns MaxBlock into poll's timeout in milliseconds: rounded
// up, so that a bound below a millisecond still blocks instead of spinning,
// and capped, so that a huge bound does not wrap to a negative (infinite)
// timeout.
func pollTimeout(d time.Duration) int {
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return int(min(ms, math.MaxInt32))
}

// openWaitFDs gathers the descriptors block waits on: the wake eventfd
// first, then the CQ's and the EQ's. A queue without one (opened without
// a wait object, or a provider without FI_GETWAIT: udp;ofi_rxd, shm)
// leaves the poller unable to sleep until its traffic comes: it then
// sleeps at most noWaitBlock at a time (see block).
func (p *Poller) openWaitFDs() error {
	var err error
	p.wakeFD, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cq: eventfd: %w", err)
	}
	p.pollFDs = []unix.PollFd{{Fd: int32(p.wakeFD), Events: unix.POLLIN}}
	p.canWait = true
	for _, q := range []fabric.Waitable{p.cq, p.eq} {
		fd, err := q.WaitFD()
		switch {
		case err == nil:
			p.pollFDs = append(p.pollFDs, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		case errors.Is(err, fabric.ENOSYS) || errors.Is(err, fabric.ENODATA):
			p.canWait = false
		default:
			return fmt.Errorf("cq: %w", err)
		}
	}
	if !p.canWait {
		p.blockMS = min(p.blockMS, noWaitBlockMS)
	}
	return nil
}

// CQ returns the completion queue, to bind endpoints to.
func (p *Poller) CQ() *fabric.CQ { return p.cq }

// EQ returns the event queue, to bind endpoints to.
func (p *Poller) EQ() *fabric.EQ { return p.eq }

// Stats returns the poller's counters.
func (p *Poller) Stats() Stats {
	return Stats{
		Completions: p.completions.Load(),
		Errors:      p.errs.Load(),
		Events:      p.events.Load(),
		Dropped:     p.dropped.Load(),
		Unreported:  p.unreported.Load(),
		Sleeps:      p.sleeps.Load(),
		EmptyPolls:  p.empty.Load(),
		WakeUps:     p.wakeups.Load(),
		Timeouts:    p.timeouts.Load(),

		CallbackTime: p.callbacks.read(),
	}
}

// Close stops the poller goroutine and closes the queues. Close the
// endpoints bound to them first. Called from a callback, it returns at once
// and the goroutine finishes when the callback returns. It is idempotent.
func (p *Poller) Close() error {
	p.closeOnce.Do(func() {
		p.regMu.Lock()
		p.stopping.Store(true)
		p.regMu.Unlock()
		p.queueMu.Lock()
		p.wakeLocked()
		p.queueMu.Unlock()
	})
	if p.OnPollerGoroutine() {
		return nil
	}
	<-p.done
	return p.closeErr
}

// Done is closed when the poller goroutine has exited and the queues are
// closed.
func (p *Poller) Done() <-chan struct{} { return p.done }
