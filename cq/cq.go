// Package cq runs completion pollers: one goroutine per completion queue
// that reads completions in batches, maps each back to the endpoint and key
// it was posted with, and delivers error completions as keyed failures. The
// same goroutine reads the event queue of the endpoints bound to it,
// because providers such as tcp make progress only while a side reads or
// waits on its queues, and it runs every callback of those endpoints
// (OnData, OnSendCompleted, OnConnectionClosed, ...).
//
// Every endpoint opens a poller of its own unless its config names one to
// share: open it with Open, give it to the endpoints, and close it after
// them. A Poller offers nothing that could post, route or drop a
// completion; the endpoint packages do that through internal/poll.
//
// A Poller spins for a budget after the last completion, then blocks on
// the queues' file descriptors (after fi_trywait), so an idle process uses
// no CPU. When work comes back soon after it blocked, as in a stream of
// large messages, it lengthens the budget to cover such gaps (see
// Config.SpinBudget). It spins inside C, in slices of a few microseconds
// between which it reads the event queue, runs queued work and yields, so
// that an empty poll costs what it costs a C program; right after work it
// spins a first short slice without yielding, while such spins catch a
// reply (a peer on another core). The default budget
// outlasts a loopback round trip plus the wake-up of a peer that slept, so
// a busy request-response exchange keeps both sides spinning. BusyPoll
// never blocks. docs/performance.md has the measurements behind the
// defaults.
package cq

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/closing"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/stats"
)

// Mode selects how a Poller waits when there is nothing to read.
type Mode uint8

const (
	// Adaptive spins for Config.SpinBudget after the last completion, then
	// blocks on the queues' file descriptors. An idle Poller uses no CPU.
	Adaptive Mode = iota
	// BusyPoll never blocks: it polls continuously, yielding the thread
	// between empty polls so that providers' own progress threads still run.
	// It costs a core per Poller, idle or not. It is the setting for the
	// lowest small-message latency (request/reply, a ping-pong): its queues
	// have no wait objects, so on tcp a read does not go through the epoll
	// set nested in the CQ's wait set, about 0.25 µs a hop. An Adaptive
	// poller spins through a steady exchange as well (its SpinBudget
	// outlasts a round trip) and differs by that cost alone, until traffic
	// pauses longer than the budget; docs/performance.md has the figures.
	// With GOMAXPROCS above the spinning pollers, a locked one is faster
	// still (Config.LockOSThread).
	BusyPoll
)

// Defaults for Config.
const (
	// DefaultSpinBudget is longer than a loopback round trip of a small
	// message plus the wake-up of a peer that blocked: when one side of a
	// ping-pong sleeps once, the other keeps spinning through the delay and
	// the pair goes back to spinning. With a budget shorter than that, one
	// side's sleep pushes the other past its budget too, and the pair can
	// settle into paying a wake-up at every hop. The price is up to this
	// much CPU after each burst of traffic. Gaps between completions that
	// outlast it (a stream of large messages) stretch the budget after the
	// first wake-up, up to StretchLimit × DefaultSpinBudget.
	DefaultSpinBudget = 200 * time.Microsecond
	// DefaultMaxBlock is the default bound of one blocking wait.
	DefaultMaxBlock = 50 * time.Millisecond
	// DefaultSize is the default number of completion queue entries.
	DefaultSize = 4096
	// MaxSize bounds Config.Size: providers allocate every entry up front,
	// and a size from a typo should be an error, not gigabytes.
	MaxSize = 1 << 22
)

// StretchLimit bounds how far a poller lengthens its spin budget for work
// that came back soon after it blocked: up to this many times
// Config.SpinBudget. A longer stretch turns blocks into spinning for
// streams whose completions come further apart, at the price of more CPU
// after the last of them.
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
	// and StretchLimit × SpinBudget apart spins through the gaps, and
	// after the last of it spins up to StretchLimit × SpinBudget before it
	// blocks. A queue without a wait descriptor (shm, udp;ofi_rxd,
	// tcp;ofi_rxm) cannot wake the poller, which then sleeps 1 ms at a
	// time: when completions came during such a sleep, the budget doubles,
	// up to 8 × SpinBudget, until a sleep finds nothing.
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
	// and costs tens of microseconds, so a locked poller does not call it
	// between empty polls and yields the core with sched_yield only; the
	// application's goroutines then get the poller's GOMAXPROCS slot only
	// when the runtime preempts it, it blocks, or every 8 ms, when it
	// passes through the scheduler once (without that, the runtime's
	// monitor preempts it every 10 ms, takes its P when it is in C, and
	// then wakes every 20 µs for a while: hundreds of wake-ups a second).
	// Leave it off unless
	// GOMAXPROCS exceeds the number of spinning pollers. When it does, a
	// locked BusyPoll poller is the setting for the lowest small-message
	// latency: an unlocked poller's Gosched then wakes a thread for an idle
	// P (two futex calls and two context switches per empty round), and on
	// a machine with as many busy threads as cores that thread takes the
	// CPU from a peer that is about to answer. docs/performance.md has the
	// figures (netio-perf --poll busy-locked).
	LockOSThread bool
	// Logger receives errors the poller cannot hand to an endpoint. The
	// zero value takes the manager's (domain.Manager.Logger).
	Logger zerolog.Logger
	// Name labels the poller in snapshots and metrics (package stats):
	// pollers of one name are summed there, so give a name per role
	// ("readout", "builder"), never one per connection. "" is
	// DefaultName.
	Name string
}

// DefaultName is the name of a poller whose Config.Name is empty.
const DefaultName = "default"

// Runtime says which poller runs an endpoint's completions and callbacks,
// and where the endpoint logs. Every endpoint config (endpoint.SendConfig,
// endpoint.ListenConfig, rdm.Config, ...) embeds it; the zero value gives
// the endpoint a poller of its own and logs nothing.
type Runtime struct {
	// Poller is an event loop to share with other endpoints of the same
	// domain (Open); the caller closes it after the endpoints. Nil gives
	// the endpoint its own, configured by PollerConfig and closed with it.
	Poller *Poller
	// PollerConfig configures the endpoint's own poller.
	PollerConfig Config
	// Logger receives connection messages (never one per message). The
	// zero value takes the manager's (domain.Manager.Logger).
	Logger zerolog.Logger
}

// Stats counts what a Poller did.
type Stats struct {
	Completions uint64 // successful completions delivered
	Errors      uint64 // error completions delivered
	Events      uint64 // connection events delivered
	Dropped     uint64 // completions or events whose endpoint was gone
	Sleeps      uint64 // times the poller blocked on its file descriptors
	EmptyPolls  uint64 // rounds that found nothing to do: the CPU spent spinning
	WakeUps     uint64 // blocks ended by a ready descriptor (traffic, or work handed over)
	Timeouts    uint64 // blocks ended by MaxBlock
	// Unreported counts the error completions of injects a connected
	// endpoint with SendConfig.Inject posted and the provider discarded
	// unsent (tcp writes one for each at Close or on a broken connection):
	// they are counted in the endpoint's SendStats.InjectsUnconfirmed, not
	// in Errors or Dropped.
	Unreported uint64
}

// Poller is a completion poller that endpoints of one domain can share:
// give it to their configs, and close it after them. It is safe for
// concurrent use.
type Poller struct {
	p       *poll.Poller
	mgr     *domain.Manager
	closing atomic.Bool  // Close has begun: the manager waits for the end
	entry   *stats.Entry // the poller in its manager's stats.Registry
	name    string
}

func init() {
	poll.Of = func(public any) *poll.Poller {
		if p, ok := public.(*Poller); ok && p != nil {
			return p.p
		}
		return nil
	}
}

// Open opens a completion queue and an event queue on mgr's domain and
// starts the poller goroutine. Close stops it and closes both queues. A nil
// manager or an invalid setting is an error matching
// netio.ErrInvalidArgument, a closed manager one matching netio.ErrClosed.
func Open(mgr *domain.Manager, cfg Config) (*Poller, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: cq: nil domain", netio.ErrInvalidArgument)
	}
	cp := &Poller{mgr: mgr}
	cfg.Logger = mgr.Logger(cfg.Logger)
	pc := cfg.internal()
	pc.OnStopped = cp.stopped
	// A provider that leaves closed endpoints in its queues' wait sets gets
	// a queue without one (quirks.Quirks.StaleWaitEntries).
	pc.NoCQWait = quirks.For(mgr.Provider()).StaleWaitEntries
	p, err := poll.Open(mgr.Fabric(), mgr.Domain(), pc)
	if err != nil {
		return nil, err
	}
	cp.p = p
	name := cfg.Name
	if name == "" {
		name = DefaultName
	}
	cp.name = name
	cp.entry = mgr.Registry().AddPoller(name, cp.fillStats)
	return cp, nil
}

// stopped leaves the registry with the final counters and ends the close
// the manager waits for (see Close).
func (p *Poller) stopped() {
	p.entry.Remove(nil)
	if p.closing.Load() {
		closing.End(p.mgr)
	}
}

// fillStats is the poller's record in its manager's stats.Registry.
func (p *Poller) fillStats(s *stats.Poller) {
	st := p.p.Stats()
	s.Completions, s.Errors, s.Events, s.Dropped = st.Completions, st.Errors, st.Events, st.Dropped
	s.Unreported = st.Unreported
	s.Spins, s.Blocks, s.WakeUps, s.Timeouts = st.EmptyPolls, st.Sleeps, st.WakeUps, st.Timeouts
	h := st.CallbackTime
	s.Callbacks = stats.Histogram{Bounds: callbackBounds, Counts: h.Counts[:], Count: h.Count, SumSeconds: h.Sum.Seconds()}
}

// callbackBounds are poll.CallbackBounds in seconds.
var callbackBounds = func() []float64 {
	out := make([]float64, len(poll.CallbackBounds))
	for i, b := range poll.CallbackBounds {
		out[i] = b.Seconds()
	}
	return out
}()

// Name returns the poller's name (Config.Name, DefaultName when unset);
// "" for a Poller not from Open.
func (p *Poller) Name() string {
	if p == nil {
		return ""
	}
	return p.name
}

// Domain returns the manager the poller was opened on; endpoints refuse a
// poller of another domain.
func (p *Poller) Domain() *domain.Manager {
	if p == nil {
		return nil
	}
	return p.mgr
}

// internal converts the config for internal/poll.
func (c Config) internal() poll.Config {
	return poll.Config{Mode: poll.Mode(c.Mode), SpinBudget: c.SpinBudget, MaxBlock: c.MaxBlock,
		Size: c.Size, LockOSThread: c.LockOSThread, Logger: c.Logger}
}

// OnPollerGoroutine reports whether the caller runs on the poller's
// goroutine, that is, inside a callback of an endpoint it serves: a call
// that waits for the poller's completions would wait for ever there.
func (p *Poller) OnPollerGoroutine() bool {
	return p != nil && p.p != nil && p.p.OnPollerGoroutine()
}

// Stats returns the poller's counters (zero for a Poller not from Open).
func (p *Poller) Stats() Stats {
	if p == nil || p.p == nil {
		return Stats{}
	}
	s := p.p.Stats()
	return Stats{Completions: s.Completions, Errors: s.Errors, Events: s.Events,
		Dropped: s.Dropped, Unreported: s.Unreported, Sleeps: s.Sleeps, EmptyPolls: s.EmptyPolls, WakeUps: s.WakeUps, Timeouts: s.Timeouts}
}

// Close stops the poller goroutine and closes the queues. Close the
// endpoints that use it first. Called from a callback, it returns at once
// and the goroutine finishes when the callback returns; the manager's
// Close waits for that (domain.CloseWait). It is idempotent, and does
// nothing on a Poller not from Open.
func (p *Poller) Close() error {
	if p == nil || p.p == nil {
		return nil
	}
	if p.closing.CompareAndSwap(false, true) {
		closing.Begin(p.mgr)
	}
	return p.p.Close()
}

// Done is closed when the poller goroutine has exited and the queues are
// closed (at once for a Poller not from Open).
func (p *Poller) Done() <-chan struct{} {
	if p == nil || p.p == nil {
		return closedChan
	}
	return p.p.Done()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
