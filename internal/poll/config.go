package poll

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/rs/zerolog"
)

// Mode selects how a Poller waits when there is nothing to read; see
// cq.Mode, its public face.
type Mode uint8

// The modes (cq.Adaptive, cq.BusyPoll).
const (
	Adaptive Mode = iota
	BusyPoll
)

// errorBackoff is how long the poller pauses after a queue or poll error,
// so that a broken queue costs a log line per millisecond, not a core.
const errorBackoff = time.Millisecond

// eqEvery is how many loop rounds pass between event queue reads, busy or
// idle; a poller also reads the event queue before and after it blocks.
// Connection events are rare and tolerate tens of microseconds, while a
// read on every empty round puts a second provider call (an epoll_wait on
// tcp) between a message's arrival and its delivery.
const eqEvery = 32

// eqAfter is how many completions may be delivered between two event queue
// reads. Rounds are not equal: one round delivers up to 1024 completions,
// and with callbacks that take milliseconds a count of rounds alone keeps
// a connection request waiting for seconds (a dial times out behind a busy
// OnData). Counting work done bounds that without a clock read.
const eqAfter = 256

// spinSlice is how long one poll of a spinning poller keeps reading the
// completion queue inside C (fabric.CQ.ReadSpin) before it comes back to
// Go to read the event queue, run queued work and yield. Spinning in Go,
// each empty poll pays a cgo transition, a clock read and two yields that
// a message arriving meanwhile waits for. The slice stays below the Go
// runtime's 20 µs monitor tick, so that the runtime does not take the P of
// a poller that merely spins; event queue reads, Do and Close wait at most
// this long.
const spinSlice = 10 * time.Microsecond

// noWaitBlockMS bounds a block of a poller whose queues have no wait
// descriptor (udp;ofi_rxd, shm): it sleeps on its wake eventfd alone and
// looks at the queues this often while idle. Use BusyPoll for latency on
// such providers.
const noWaitBlockMS = 1

// Defaults and bounds for Config; cq documents them.
const (
	DefaultSpinBudget = 200 * time.Microsecond
	DefaultMaxBlock   = 50 * time.Millisecond
	DefaultSize       = 4096
	DefaultEQSize     = 256
	MaxSize           = 1 << 22
	StretchLimit      = 4
)

// Config configures a Poller; cq.Config documents each field.
type Config struct {
	Mode         Mode
	SpinBudget   time.Duration
	MaxBlock     time.Duration
	Size         int
	LockOSThread bool
	Logger       zerolog.Logger
	// NoCQWait opens the completion queue without a wait object whatever
	// the mode (quirks.Quirks.StaleWaitEntries): the poller then sleeps at
	// most 1 ms at a time, as for a provider without wait objects.
	NoCQWait bool
	// OnStopped, if set, runs on the poller goroutine after the queues are
	// closed and Done is closed: the last thing the poller does.
	OnStopped func()
	// now is the clock the spin budget is measured with: time.Now, or a
	// test's (WithClock in export_test.go), which lets a test decide how
	// long each gap between works lasts for the poller.
	now func() time.Time
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
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}
