// Package coalescer is small-message coalescing for every sender kind: it
// copies messages into a send buffer in netio3's coalesced format (package
// coalesce, docs/wire.md) and posts the buffer as one libfabric message
// when the next message does not fit, when the flush interval has passed
// since its first message, on Flush, and as the sender closes. The
// connected buffered endpoint has one Coalescer (endpoint.CoalesceConfig);
// a connectionless endpoint has one per peer (rdm.CoalesceConfig). Where
// the buffers come from and where they go is the Target's business.
package coalescer

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/sendbuf"
)

// DefaultFlushInterval is how long a coalesced buffer waits at most for
// more messages when the configured interval is 0.
const DefaultFlushInterval = time.Millisecond

// flushRetry bounds the wait before an interval flush is tried again after
// the provider's transmit queue was full.
const flushRetry = 100 * time.Microsecond

// Target is the sender a Coalescer fills buffers for.
type Target interface {
	// Take leases a free send buffer, or returns nil.
	Take() *sendbuf.NetworkBuffer
	// Post sends buf's first n bytes; OnSendCompleted reports the buffer's
	// ID. A status other than OK posted nothing and buf stays leased.
	Post(buf *sendbuf.NetworkBuffer, n int) netio.Status
	// PostLast is Post for the last buffer, as the sender closes: it must
	// not be refused for a bound that a later retry would pass (the inject
	// bound of a connected endpoint), as no retry follows.
	PostLast(buf *sendbuf.NetworkBuffer, n int) netio.Status
	// Release gives back a leased buffer that was not posted.
	Release(buf *sendbuf.NetworkBuffer)
	// Ended reports whether the sender ended: take nothing more.
	Ended() bool
}

// Stats count what a Coalescer did; the public CoalesceStats types of the
// endpoint packages have the same fields and document them.
type Stats struct {
	Messages, Bytes, Pending, Buffers                           uint64
	FullFlushes, IntervalFlushes, ExplicitFlushes, CloseFlushes uint64
	Dropped                                                     uint64
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Messages += o.Messages
	s.Bytes += o.Bytes
	s.Pending += o.Pending
	s.Buffers += o.Buffers
	s.FullFlushes += o.FullFlushes
	s.IntervalFlushes += o.IntervalFlushes
	s.ExplicitFlushes += o.ExplicitFlushes
	s.CloseFlushes += o.CloseFlushes
	s.Dropped += o.Dropped
}

// flushCause says why a coalesced buffer was posted.
type flushCause uint8

const (
	flushFull flushCause = iota
	flushInterval
	flushExplicit
	flushClose
	numFlushCauses
)

// Coalescer is the coalescing state of one stream of buffers: the current
// buffer and the encoder over it, guarded by mu, and the flusher goroutine
// that posts a buffer once its interval has passed. cur is non-nil exactly
// when messages wait to be posted.
type Coalescer struct {
	t        Target
	log      zerolog.Logger
	peer     string // for log messages
	interval time.Duration
	maxLen   int // buffer size: the bytes a first message may take

	mu      sync.Mutex
	cur     *sendbuf.NetworkBuffer
	enc     coalesce.Encoder
	first   time.Time // when cur got its first message
	armed   bool      // timer runs for the current or an earlier buffer
	closed  bool      // the sender ended: take nothing more
	msgs    uint64
	bytes   uint64
	flushes [numFlushCauses]uint64
	dropped uint64
	// counts are the same counts per buffer, for snapshots (package
	// stats): added under mu once per posted or dropped buffer, read
	// without it (Posted); shared by the coalescers of one endpoint
	// (NewShared).
	counts *Counts

	timer    *time.Timer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the flusher returns
}

// Counts are what coalescers posted and dropped, counted per buffer in
// atomics that a snapshot reads without the lock a send takes. One
// Counts may serve several coalescers (an rdm endpoint's peers): its sums
// then only grow, whichever coalescer ends.
type Counts struct {
	messages, buffers, dropped atomic.Uint64
}

// Read returns the messages in posted buffers, the buffers posted and
// the messages dropped.
func (c *Counts) Read() (messages, buffers, dropped uint64) {
	return c.messages.Load(), c.buffers.Load(), c.dropped.Load()
}

// New starts coalescing into t's buffers of bufferSize bytes, posting a
// buffer at most interval (0: DefaultFlushInterval) after its first
// message. End stops it.
func New(t Target, bufferSize int, interval time.Duration, log zerolog.Logger, peer string) *Coalescer {
	return NewShared(t, bufferSize, interval, log, peer, new(Counts))
}

// NewShared is New counting into counts, which other coalescers may
// share.
func NewShared(t Target, bufferSize int, interval time.Duration, log zerolog.Logger, peer string, counts *Counts) *Coalescer {
	if interval == 0 {
		interval = DefaultFlushInterval
	}
	co := &Coalescer{t: t, log: log, peer: peer, interval: interval, maxLen: bufferSize, counts: counts,
		timer: time.NewTimer(time.Hour), stop: make(chan struct{}), done: make(chan struct{})}
	co.timer.Stop()
	go co.run()
	return co
}

// Send copies a message with tag, status and the concatenation of parts
// as its payload into the current buffer. It returns OK when the message
// was taken; NoResources when no buffer is free or the transmit queue is
// full (nothing taken); InvalidArgument when it cannot fit in an empty
// buffer (nothing changes); Closed once the sender ended; Failed when the
// provider refused to post the full buffer. It does not allocate.
func (co *Coalescer) Send(tag uint64, status uint8, parts ...[]byte) netio.Status {
	n := 0
	for _, p := range parts {
		if n += len(p); n > coalesce.MaxPayload {
			return netio.InvalidArgument
		}
	}
	co.mu.Lock()
	dst, st := co.reserve(tag, status, n)
	for _, p := range parts {
		dst = dst[copy(dst, p):]
	}
	co.mu.Unlock()
	return st
}

// Flush posts the current buffer now, if it holds messages: OK when it did
// or there was nothing to post, NoResources (retry), Closed, or Failed.
func (co *Coalescer) Flush() netio.Status {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.closed {
		return netio.Closed
	}
	return co.post(flushExplicit)
}

// Posted returns, without the lock a send takes, the messages in posted
// buffers, the buffers posted and the messages dropped: the counters a
// snapshot (package stats) reads (summed with the coalescers that share
// them).
func (co *Coalescer) Posted() (messages, buffers, dropped uint64) { return co.counts.Read() }

// Stats returns the counters.
func (co *Coalescer) Stats() Stats {
	co.mu.Lock()
	defer co.mu.Unlock()
	f := co.flushes
	return Stats{Messages: co.msgs, Bytes: co.bytes, Pending: uint64(co.enc.Count()),
		Buffers:     f[flushFull] + f[flushInterval] + f[flushExplicit] + f[flushClose],
		FullFlushes: f[flushFull], IntervalFlushes: f[flushInterval], ExplicitFlushes: f[flushExplicit],
		CloseFlushes: f[flushClose], Dropped: co.dropped}
}

// reserve makes room for a message with an n-byte payload and returns where
// the payload goes, posting the current buffer first when the message does
// not fit in it. On any status but OK nothing was taken and dst is nil.
// co.mu is held.
func (co *Coalescer) reserve(tag uint64, status uint8, n int) (dst []byte, st netio.Status) {
	switch {
	case n > co.maxLen-coalesce.Overhead(status, true):
		return nil, netio.InvalidArgument // checked first: it fits in no buffer, free or not
	case co.closed || co.t.Ended():
		return nil, netio.Closed
	}
	if co.cur != nil {
		var err error
		if dst, err = co.enc.Reserve(tag, status, n); err == nil {
			return co.taken(dst), netio.OK
		}
		if st = co.post(flushFull); st != netio.OK { // err is ErrFull: n was checked
			return nil, st
		}
	}
	if co.cur = co.t.Take(); co.cur == nil {
		return nil, netio.NoResources
	}
	co.enc.Reset(co.cur.Bytes())
	dst, _ = co.enc.Reserve(tag, status, n) // fits: n was checked against an empty buffer
	co.first = time.Now()
	if !co.armed {
		co.armed = true
		co.timer.Reset(co.interval)
	}
	return co.taken(dst), netio.OK
}

// taken counts a message whose payload goes to dst, and returns dst.
func (co *Coalescer) taken(dst []byte) []byte {
	co.msgs++
	co.bytes += uint64(len(dst))
	return dst
}

// post sends the current buffer, if any, and counts why. On failure the
// buffer stays current with its messages. co.mu is held.
func (co *Coalescer) post(cause flushCause) netio.Status {
	if co.cur == nil {
		return netio.OK
	}
	if st := co.postCurrent(cause); st != netio.OK {
		return st
	}
	co.counts.messages.Add(uint64(co.enc.Count()))
	co.counts.buffers.Add(1)
	co.cur = nil
	co.enc.Reset(nil)
	co.flushes[cause]++
	return netio.OK
}

// postCurrent posts the current buffer with the target's post for cause:
// PostLast for the close flush, Post otherwise. co.mu is held.
func (co *Coalescer) postCurrent(cause flushCause) netio.Status {
	if cause == flushClose {
		return co.t.PostLast(co.cur, co.enc.Len())
	}
	return co.t.Post(co.cur, co.enc.Len())
}

// run is the flusher goroutine: it posts the current buffer once its first
// message is FlushInterval old. The timer is armed by a buffer's first
// message and not moved while buffers fill faster than the interval, so a
// busy stream costs one timer per interval, not one per buffer.
func (co *Coalescer) run() {
	defer close(co.done)
	for {
		select {
		case <-co.stop:
			return
		case <-co.timer.C:
			co.flushDue()
		}
	}
}

// flushDue posts the current buffer if its interval has passed, or re-arms
// the timer for when it will.
func (co *Coalescer) flushDue() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.armed = false
	if co.cur == nil || co.closed {
		return
	}
	wait := co.interval - time.Since(co.first)
	if wait <= 0 {
		switch co.post(flushInterval) {
		case netio.OK, netio.Closed: // Closed: the end drops and counts them
			return
		}
		wait = min(co.interval, flushRetry) // queue full or post refused: try again
	}
	co.armed = true
	co.timer.Reset(wait)
}

// FlushOnClose posts the current buffer as the sender's Close begins, with
// Target.PostLast; what cannot be posted is dropped and counted by End.
func (co *Coalescer) FlushOnClose() {
	co.mu.Lock()
	defer co.mu.Unlock()
	if !co.closed {
		if st := co.post(flushClose); st != netio.OK {
			co.log.Warn().Str("peer", co.peer).Stringer("status", st).Int("messages", co.enc.Count()).
				Msg("close: could not post the coalesced buffer")
		}
	}
}

// End stops coalescing for good: it takes nothing more, drops the messages
// of a buffer not posted (counted and logged, and the buffer goes back),
// and waits for the flusher goroutine to return. It is idempotent.
func (co *Coalescer) End() {
	co.mu.Lock()
	if !co.closed {
		co.closed = true
		co.dropCurrent()
	}
	co.mu.Unlock()
	co.stopOnce.Do(func() { close(co.stop) })
	co.timer.Stop()
	<-co.done
}

// dropCurrent gives back the current buffer with its messages unsent,
// counting and logging the loss. co.mu is held.
func (co *Coalescer) dropCurrent() {
	if co.cur == nil {
		return
	}
	n := co.enc.Count()
	co.dropped += uint64(n)
	co.counts.dropped.Add(uint64(n))
	co.log.Warn().Str("peer", co.peer).Int("messages", n).Int("bytes", co.enc.Len()).
		Msg("coalesced messages dropped: the sender ended before they were posted")
	co.t.Release(co.cur)
	co.cur = nil
	co.enc.Reset(nil)
}
