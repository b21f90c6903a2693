// Package cq runs completion pollers: one goroutine per completion queue
// that reads completions in batches, maps each back to the owner and key it
// was posted with, and delivers error completions as keyed failures. The
// same goroutine reads the event queue of the endpoints bound to it, because
// providers such as tcp make progress only while a side reads or waits on
// its queues.
//
// A Poller spins for a budget after the last completion, then blocks on
// the queues' file descriptors (after fi_trywait), so an idle process
// uses no CPU. When work comes back soon after it blocked, as in a stream
// of large messages, it lengthens the budget to cover such gaps (see
// Config.SpinBudget). It spins inside C, in slices of a few microseconds
// between which it reads the event queue, runs queued work and yields, so
// that an empty poll costs what it costs a C program. The default budget
// outlasts a loopback round trip plus the wake-up of a peer that slept,
// so a busy request-response exchange keeps both sides spinning. BusyPoll
// never blocks.
package cq

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// Mode selects how a Poller waits when there is nothing to read.
type Mode uint8

const (
	// Adaptive spins for Config.SpinBudget after the last completion, then
	// blocks on the queues' file descriptors. An idle Poller uses no CPU.
	Adaptive Mode = iota
	// BusyPoll never blocks: it polls continuously, yielding the thread
	// between empty polls so that providers' own progress threads still run.
	// It costs a core per Poller.
	BusyPoll
)

// errorBackoff is how long the poller pauses after a queue or poll error,
// so that a broken queue costs a log line per millisecond, not a core.
const errorBackoff = time.Millisecond

// eqEvery is how many loop rounds pass between event queue reads, busy or
// idle; a poller also reads the event queue before and after it blocks.
// Connection events are rare and tolerate tens of microseconds; reading the
// queue on every empty round put a second provider call (an epoll_wait on
// tcp) between a message's arrival and its delivery.
const eqEvery = 32

// eqAfter is how many completions may be delivered between two event queue
// reads. Rounds are not equal: one round delivers up to 1024 completions,
// and with callbacks that take milliseconds, 32 such rounds kept a
// connection request waiting for tens of seconds (a dial timed out behind a
// busy OnData). Counting work done bounds that without a clock read.
const eqAfter = 256

// spinSlice is how long one poll of a spinning poller keeps reading the
// completion queue inside C (fabric.CQ.ReadSpin) before it comes back to
// Go to read the event queue, run queued work and yield. Spinning in Go,
// each empty poll paid a cgo transition, a clock read, runtime.Gosched and
// sched_yield: a message that arrived meanwhile waited for them (0.1-0.2 µs
// of a 4.5 µs one-way ping-pong here). The slice stays below the Go
// runtime's 20 µs monitor tick, so that the runtime does not take the P of
// a poller that merely spins; event queue reads, Do and Close wait at most
// this long.
const spinSlice = 10 * time.Microsecond

// Defaults for Config.
const (
	// DefaultSpinBudget is longer than a loopback round trip of a small
	// message (≈ 12 µs) plus the wake-up of a peer that blocked (≈ 40-50
	// µs measured here): when one side of a ping-pong sleeps once, the
	// other keeps spinning through the delay and the pair goes back to
	// spinning. With a budget shorter than that, one side's sleep pushes
	// the other past its budget too, and the pair can settle into paying a
	// wake-up at every hop. The price is up to this much CPU after each
	// burst of traffic. Gaps between completions that outlast it (in a
	// 1 MiB stream, 150-300 µs; in a 1 MiB ping-pong, 250-500 µs) stretch
	// the budget after the first wake-up, up to StretchLimit ×
	// DefaultSpinBudget.
	DefaultSpinBudget = 200 * time.Microsecond
	DefaultMaxBlock   = 50 * time.Millisecond
	DefaultSize       = 4096
	DefaultEQSize     = 256
	// MaxSize bounds Config.Size: providers allocate every entry up front,
	// and a size from a typo should be an error, not gigabytes.
	MaxSize = 1 << 22
)

// StretchLimit bounds how far a poller lengthens its spin budget for
// work that came back soon after it blocked: up to this many times
// Config.SpinBudget (800 µs by default). Measured here (tcp, loopback,
// netio-perf --sizes 1M): with the budget fixed at 200 µs, the pollers
// of a 1 MiB stream blocked 740-920 times a second, the stream moved
// 6846 MB/s and the ping-pong took 144-223 µs one way (p50) and
// 382-465 µs (p99); stretched, they blocked 8-16 times a second, the
// stream moved 7176 MB/s (medians of 8 rounds interleaved with the C
// baseline, which moved 7635) and the ping-pong took 138-146 µs (p50)
// and 293-310 µs (p99).
const StretchLimit = 4

// Config configures a Poller. The zero value is usable.
type Config struct {
	// Mode is Adaptive (default) or BusyPoll.
	Mode Mode
	// SpinBudget is how long an Adaptive poller keeps polling after the last
	// completion before it blocks. 0 selects DefaultSpinBudget; a negative
	// value blocks at once. A poller woken by MaxBlock with nothing to do
	// blocks again without spinning, so an idle poller costs no CPU
	// whatever the budget.
	//
	// When work wakes a blocked poller within StretchLimit × SpinBudget of
	// its last work, the poller spins twice that gap next time (at most
	// StretchLimit × SpinBudget): work that comes at such intervals, as in
	// a stream of large messages, finds it spinning rather than paying a
	// wake-up (tens of µs, and the provider makes no progress meanwhile).
	// A longer gap, or a MaxBlock timeout, brings the budget back to
	// SpinBudget. The price: a poller whose work comes between SpinBudget
	// and StretchLimit × SpinBudget apart (200-800 µs by default) spins
	// through the gaps, and after the last of it spins up to StretchLimit
	// × SpinBudget before it blocks.
	SpinBudget time.Duration
	// MaxBlock bounds one blocking wait. Providers here (sockets, tcp) also
	// make progress when their queues are read; a poller that blocked
	// forever would leave progress to the provider's own thread alone, which
	// stalls a stream under CPU load. 0 selects DefaultMaxBlock; an idle
	// poller wakes this often and goes back to sleep. It is rounded up to
	// whole milliseconds.
	MaxBlock time.Duration
	// Size is the number of entries of the completion queue. It should be at
	// least the number of operations that can be outstanding on all
	// endpoints bound to it. 0 selects DefaultSize; at most MaxSize.
	Size int
	// LockOSThread runs the poller goroutine on an OS thread of its own
	// (runtime.LockOSThread), for callers who pin that thread to a core
	// (sched_setaffinity from a callback) or keep per-thread state. The
	// trade-off: a locked goroutine's runtime.Gosched hands its thread over
	// and costs tens of microseconds (36 µs per hop in BenchmarkPingPong),
	// so a locked poller does not call it between empty polls and yields
	// the core with sched_yield only; the application's goroutines then get
	// the poller's GOMAXPROCS slot only when the runtime preempts it (every
	// 10 ms) or it blocks. It does not lower latency by itself (the same
	// median hop in BenchmarkPingPong). Leave it off unless GOMAXPROCS
	// exceeds the number of spinning pollers.
	LockOSThread bool
	// Logger receives errors the poller cannot hand to an owner. The zero
	// value logs nothing.
	Logger zerolog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Mode > BusyPoll {
		return c, fmt.Errorf("%w: cq: unknown mode %d", netio.ErrInvalidArgument, c.Mode)
	}
	if c.Size < 0 || c.Size > MaxSize {
		return c, fmt.Errorf("%w: cq: size %d outside 0..%d", netio.ErrInvalidArgument, c.Size, MaxSize)
	}
	if c.SpinBudget == 0 {
		c.SpinBudget = DefaultSpinBudget
	}
	if c.MaxBlock < 0 {
		return c, fmt.Errorf("%w: cq: negative MaxBlock", netio.ErrInvalidArgument)
	}
	if c.MaxBlock == 0 {
		c.MaxBlock = DefaultMaxBlock
	}
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	return c, nil
}

// Result is the outcome of one posted operation.
type Result struct {
	Status netio.Status // OK, Failed, or Canceled
	Errno  fabric.Errno // the libfabric error for a failure, else 0
	Flags  uint64       // fabric.FlagSend, fabric.FlagRecv, ...
	Len    int          // bytes received, for receives
}

// Handler owns operations posted with contexts from its Owner. Its methods
// run on the poller goroutine and must not block.
type Handler interface {
	// HandleCompletion is called once per completed operation, with the key
	// the operation was posted with.
	HandleCompletion(key uint32, r Result)
	// HandleEvent is called for connection events of the endpoints opened
	// with the Owner's EndpointContext. For EventConnReq the handler owns
	// ev.Info and must free it.
	HandleEvent(ev fabric.Event)
}

// Owner routes completions and events to one Handler. Operations are
// posted with Context(key); endpoints are opened with EndpointContext.
type Owner struct {
	id uint32
}

// Context returns the operation context for key: the owner's ID in the
// upper 32 bits and key in the lower.
func (o Owner) Context(key uint32) uint64 { return uint64(o.id)<<32 | uint64(key) }

// EndpointContext returns the context to open endpoints with, so that their
// connection events reach the owner.
func (o Owner) EndpointContext() uint64 { return uint64(o.id) << 32 }

// Valid reports whether the owner was returned by Register.
func (o Owner) Valid() bool { return o.id != 0 }

// Stats counts what a Poller did.
type Stats struct {
	Completions uint64 // successful completions delivered
	Errors      uint64 // error completions delivered
	Events      uint64 // connection events delivered
	Dropped     uint64 // completions or events whose owner was gone
	Sleeps      uint64 // times the poller blocked on its file descriptors
	EmptyPolls  uint64 // rounds that found nothing to do: the CPU spent spinning
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
	blockMS int // cfg.MaxBlock as a poll timeout

	regMu  sync.Mutex
	nextID uint32
	owners atomic.Pointer[map[uint32]Handler]

	queueMu  sync.Mutex // guards queue, atStop, draining and wakeFD
	queue    []func()
	spare    []func() // poller goroutine only: the queue's other half, reused
	atStop   []func()
	queued   atomic.Bool
	draining bool

	stopping  atomic.Bool
	sleeping  atomic.Bool // the poller is in block: Go, Do and Close must wake it
	done      chan struct{}
	goid      atomic.Uint64 // the poller goroutine's ID while it runs
	closeOnce sync.Once
	closeErr  error

	completions, errs, events, dropped, sleeps, empty atomic.Uint64
}

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
	p := &Poller{cfg: cfg, fab: fab, log: cfg.Logger, wakeFD: -1, blockMS: pollTimeout(cfg.MaxBlock), done: make(chan struct{})}
	empty := map[uint32]Handler{}
	p.owners.Store(&empty)
	if p.cq, err = dom.OpenCQ(cfg.Size, wait); err != nil {
		return nil, openError(err)
	}
	if p.eq, err = fab.OpenEQ(DefaultEQSize, wait); err != nil {
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

func (p *Poller) openWaitFDs() error {
	cqfd, err := p.cq.WaitFD()
	if err != nil {
		return fmt.Errorf("cq: %w", err)
	}
	eqfd, err := p.eq.WaitFD()
	if err != nil {
		return fmt.Errorf("cq: %w", err)
	}
	p.wakeFD, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cq: eventfd: %w", err)
	}
	p.pollFDs = []unix.PollFd{
		{Fd: int32(cqfd), Events: unix.POLLIN},
		{Fd: int32(eqfd), Events: unix.POLLIN},
		{Fd: int32(p.wakeFD), Events: unix.POLLIN},
	}
	return nil
}

// CQ returns the completion queue, to bind endpoints to.
func (p *Poller) CQ() *fabric.CQ { return p.cq }

// EQ returns the event queue, to bind endpoints to.
func (p *Poller) EQ() *fabric.EQ { return p.eq }

// Register adds a handler and returns its Owner. Its completions and events
// are delivered until Unregister. A nil handler is an error matching
// netio.ErrInvalidArgument.
func (p *Poller) Register(h Handler) (Owner, error) {
	if h == nil {
		return Owner{}, fmt.Errorf("%w: cq: register a nil handler", netio.ErrInvalidArgument)
	}
	p.regMu.Lock()
	defer p.regMu.Unlock()
	if p.stopping.Load() {
		return Owner{}, fmt.Errorf("cq: register: %w", netio.ErrClosed)
	}
	if p.nextID == ^uint32(0) {
		return Owner{}, fmt.Errorf("%w: cq: owner IDs exhausted", netio.ErrNoResources)
	}
	p.nextID++ // IDs are never reused, so a late completion never reaches a new owner
	old := *p.owners.Load()
	next := make(map[uint32]Handler, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[p.nextID] = h
	p.owners.Store(&next)
	return Owner{id: p.nextID}, nil
}

// Unregister removes the owner's handler. Completions and events for it that
// are read later are counted as dropped.
func (p *Poller) Unregister(o Owner) {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	old := *p.owners.Load()
	if _, ok := old[o.id]; !ok {
		return
	}
	next := make(map[uint32]Handler, len(old))
	for k, v := range old {
		if k != o.id {
			next[k] = v
		}
	}
	p.owners.Store(&next)
}

// Owners returns the number of registered handlers.
func (p *Poller) Owners() int { return len(*p.owners.Load()) }

// OnPollerGoroutine reports whether the caller runs on the poller goroutine,
// that is, inside one of its callbacks. It costs about a microsecond; it is
// meant for Close and Do, not for hot paths.
func (p *Poller) OnPollerGoroutine() bool {
	id := p.goid.Load()
	return id != 0 && goroutineID() == id
}

// goroutineID returns the calling goroutine's ID, read from the header of
// its stack trace ("goroutine 123 [running]:"). Go has no API for it; the
// poller needs it only to let a callback call Close and Do without waiting
// for itself. (Locking the poller to an OS thread and comparing thread IDs
// would avoid this, but makes every runtime.Gosched a thread hand-off that
// costs ~30 µs of latency.)
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// Do runs fn on the poller goroutine, between two batches, and returns when
// it has run. It runs fn at once when called on the poller goroutine or when
// the poller has stopped. Use it to serialize state changes with callbacks.
// A nil fn does nothing.
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
// queues and before it closes them, or at once when it has stopped already.
// Objects whose close must not race with queue reads (a passive endpoint:
// tcp in libfabric 1.17 reads freed connection handles after fi_close of a
// listening endpoint) are closed here. A nil fn does nothing.
func (p *Poller) AtStop(fn func()) {
	if fn != nil && !p.enqueue(fn, true) {
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

// Stats returns the poller's counters.
func (p *Poller) Stats() Stats {
	return Stats{
		Completions: p.completions.Load(),
		Errors:      p.errs.Load(),
		Events:      p.events.Load(),
		Dropped:     p.dropped.Load(),
		Sleeps:      p.sleeps.Load(),
		EmptyPolls:  p.empty.Load(),
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
	var spin time.Duration     // > 0: the last round was empty, spin in C this long
	budget := p.cfg.SpinBudget // stretched by work that came soon after a block
	eqDue := true              // read the event queue in this round
	sinceEQ := 0               // completions delivered since the last event queue read
	for iter := uint(1); !p.stopping.Load(); iter++ {
		n := p.pollCQ(spin)
		if sinceEQ += n; eqDue || iter%eqEvery == 0 || sinceEQ >= eqAfter {
			n += p.pollEQ()
			eqDue, sinceEQ = false, 0
		}
		if p.queued.Load() {
			n += p.runQueue()
		}
		if n > 0 {
			idleSince, spin = time.Time{}, 0
			continue
		}
		p.empty.Add(1)
		if p.cfg.Mode == BusyPoll {
			p.yield()
			spin = spinSlice
			continue
		}
		now := time.Now()
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
			// A queue's descriptor woke us: traffic (or a Do) again, so a
			// fresh spin budget, as after a completion, stretched if the
			// work came soon. Read the event queue in the next round, in
			// case it was that one.
			budget = stretchedBudget(p.cfg.SpinBudget, time.Since(idleSince))
			idleSince, eqDue = time.Time{}, true
		case timedOut:
			// idleSince stays as it was: a wake-up that brings nothing (the
			// MaxBlock timeout) leads straight back to blocking, not to
			// another spin budget, so an idle poller costs no CPU.
			budget, eqDue = p.cfg.SpinBudget, true
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
	p.draining = true // later Do and AtStop calls run inline
	p.queueMu.Unlock()
	for _, fn := range queue {
		fn()
	}
	for _, fn := range atStop {
		fn()
	}
	p.goid.Store(0)
	err := p.closeQueues()
	p.queueMu.Lock()
	p.closeWakeFD()
	p.closeErr = err
	close(p.done)
	p.queueMu.Unlock()
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
		n, avail, errno := p.readCQ(i == 0, spin)
		if errno != 0 {
			p.log.Error().Err(errno).Msg("cq: read failed")
			time.Sleep(errorBackoff) // do not spin on a broken queue
			return total
		}
		if avail {
			p.dispatchError()
			total++
			continue
		}
		if n == 0 {
			return total
		}
		owners := *p.owners.Load()
		for i := range n {
			c := p.cq.Entry(i)
			h, ok := owners[uint32(c.Context>>32)]
			if !ok {
				p.dropped.Add(1)
				continue
			}
			h.HandleCompletion(uint32(c.Context), Result{Status: netio.OK, Flags: c.Flags, Len: int(c.Len)})
		}
		p.completions.Add(uint64(n))
		total += n
		if n < fabric.MaxBatch {
			return total
		}
	}
	return total
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
	h, found := (*p.owners.Load())[uint32(ce.Context>>32)]
	if !found {
		p.dropped.Add(1)
		return
	}
	st := netio.Failed
	if ce.Errno == fabric.ECANCELED {
		st = netio.Canceled
	}
	p.errs.Add(1)
	h.HandleCompletion(uint32(ce.Context), Result{Status: st, Errno: ce.Errno, Flags: ce.Flags, Len: int(ce.Len)})
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
		h, found := (*p.owners.Load())[uint32(ev.Context>>32)]
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
	if p.queued.Load() || p.stopping.Load() || !p.fab.TryWait(p.cq, p.eq) {
		return pending
	}
	p.sleeps.Add(1)
	n, err := unix.Poll(p.pollFDs, p.blockMS)
	if err != nil && err != unix.EINTR {
		p.log.Error().Err(err).Msg("cq: poll failed")
		time.Sleep(errorBackoff)
		return timedOut
	}
	if p.pollFDs[2].Revents != 0 {
		var buf [8]byte
		_, _ = unix.Read(p.wakeFD, buf[:])
	}
	if n > 0 {
		return ready
	}
	return timedOut
}

// yield lets others run between empty polls: runtime.Gosched the
// application's goroutines (a spinning poller holds one of GOMAXPROCS
// slots; on two cores two pollers would leave the sender none), and
// sched_yield the provider's own threads (the sockets progress thread) and
// the peer's poller when both share a core on a loaded machine. A poller
// locked to its thread skips Gosched, which would hand the thread over
// (see Config.LockOSThread).
func (p *Poller) yield() {
	if !p.cfg.LockOSThread {
		runtime.Gosched()
	}
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
