package endpoint

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/sendbuf"
)

// DefaultCoalesceFlushInterval is how long a coalesced buffer waits at most
// for more messages when CoalesceConfig.FlushInterval is 0.
const DefaultCoalesceFlushInterval = time.Millisecond

// flushRetry bounds the wait before an interval flush is tried again after
// the provider's transmit queue was full.
const flushRetry = 100 * time.Microsecond

// CoalesceConfig turns on small-message coalescing on a buffered send
// endpoint (SendConfig.Coalesce). SendMessage and its variants then copy
// messages into the endpoint's current send buffer in netio3's coalesced
// format (docs/wire.md, package coalesce), and a buffer goes out as one
// libfabric message when the next message does not fit in it, when
// FlushInterval has passed since its first message, on Flush, and on
// Close. The peer must decode the buffers: a listener with
// ListenConfig.OnMessage, or a netio3 peer.
//
// A coalescing endpoint owns its buffers: GetBuffer returns nil, and
// SendBuffer and ReleaseBuffer return InvalidArgument. To send buffers
// built by hand in the coalesced format, build them with coalesce.Encoder
// on an endpoint without Coalesce.
type CoalesceConfig struct {
	// FlushInterval is the longest a buffer waits for more messages after
	// its first one: a message is posted at most about this long after
	// SendMessage took it (longer only while the provider's transmit queue
	// is full). 0 selects DefaultCoalesceFlushInterval; negative is an
	// error.
	FlushInterval time.Duration
}

func (c *CoalesceConfig) validate() error {
	if c != nil && c.FlushInterval < 0 {
		return fmt.Errorf("%w: endpoint: negative Coalesce.FlushInterval %v", netio.ErrInvalidArgument, c.FlushInterval)
	}
	return nil
}

// CoalesceStats counts what the coalescing of a send endpoint did. Buffers
// sent also count in SendStats (one send each), and their completions are
// reported through OnSendCompleted with the buffer ID as the key.
type CoalesceStats struct {
	Messages uint64 // messages taken by SendMessage and its variants
	Bytes    uint64 // payload bytes of those messages
	Pending  uint64 // messages in the current buffer, not yet posted
	Buffers  uint64 // coalesced buffers posted: the sum of the flushes below

	FullFlushes     uint64 // buffers posted because the next message did not fit
	IntervalFlushes uint64 // buffers posted because FlushInterval had passed
	ExplicitFlushes uint64 // buffers posted by Flush
	CloseFlushes    uint64 // buffers posted by Close

	// Dropped counts messages taken but never posted, because the
	// connection ended first (each loss is logged too). It does not count
	// posted buffers that were canceled: OnSendCompleted reports those.
	Dropped uint64
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

// coalescer is the coalescing state of a buffered send endpoint: the
// current buffer and the encoder over it, guarded by mu, and the flusher
// goroutine that posts a buffer once its interval has passed. cur is
// non-nil exactly when messages wait to be posted.
type coalescer struct {
	s        *SendEndpointBuffered
	interval time.Duration
	maxLen   int // buffer size: the bytes a first message may take

	mu      sync.Mutex
	cur     *sendbuf.NetworkBuffer
	enc     coalesce.Encoder
	first   time.Time // when cur got its first message
	armed   bool      // timer runs for the current or an earlier buffer
	closed  bool      // the connection ended: take nothing more
	msgs    uint64
	bytes   uint64
	flushes [numFlushCauses]uint64
	dropped uint64
	// The same counts per buffer, for snapshots (package stats): written
	// under mu once per posted or dropped buffer, read without it.
	sentMsgs, sentBufs, droppedMsgs atomic.Uint64

	timer    *time.Timer
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // closed when the flusher returns
}

// startCoalescing sets up coalescing when the config asks for it. It runs
// once the buffers exist, while dialling.
func (s *SendEndpointBuffered) startCoalescing() {
	cfg := s.cfg.Coalesce
	if cfg == nil {
		return
	}
	co := &coalescer{s: s, interval: cfg.FlushInterval, maxLen: s.pool.BufferSize(),
		timer: time.NewTimer(time.Hour), stop: make(chan struct{}), done: make(chan struct{})}
	if co.interval == 0 {
		co.interval = DefaultCoalesceFlushInterval
	}
	co.timer.Stop()
	s.co = co
	go co.run()
}

// SendMessage copies data into the current buffer as one message with tag
// and status 0 (see CoalesceConfig). It returns OK when the message was
// taken; NoResources when no buffer is free or the provider's transmit
// queue is full (the message was not taken: retry after a completion, and
// not by spinning inside a callback); InvalidArgument when the endpoint is
// not coalescing or the message cannot fit in an empty buffer (nothing
// changes); Closed after Close or connection loss; Failed when the
// provider refused to post the full buffer. A full buffer of HandOffSize
// bytes or more is posted by the poller goroutine (see SendBuffer): the
// provider's answer to that post comes through OnSendCompleted, with the
// buffer's key, not here. data may be reused at once. It is safe for
// concurrent use and does not allocate.
func (s *SendEndpointBuffered) SendMessage(tag uint64, data []byte) netio.Status {
	return s.SendMessageStatus(tag, 0, data)
}

// SendMessageV is SendMessage for a payload given in parts
// (scatter-gather): the message's payload is their concatenation.
func (s *SendEndpointBuffered) SendMessageV(tag uint64, parts [][]byte) netio.Status {
	return s.SendMessageStatus(tag, 0, parts...)
}

// SendMessageStatus is SendMessage with an 8-bit status carried with the
// message (netio3's per-message status; 0 means none and costs no byte on
// the wire), and a payload given as one or more parts.
func (s *SendEndpointBuffered) SendMessageStatus(tag uint64, status uint8, parts ...[]byte) netio.Status {
	co := s.co
	if co == nil {
		return netio.InvalidArgument
	}
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

// Flush posts the current buffer now, if it holds messages. It returns OK
// when it did or there was nothing to post; NoResources when the
// provider's transmit queue is full (retry); InvalidArgument when the
// endpoint is not coalescing; Closed after Close or connection loss;
// Failed when the provider refused the post. A buffer of HandOffSize bytes
// or more (or one behind it) is posted by the poller goroutine: OK then
// means queued, and a refusal comes through OnSendCompleted. It does not
// wait for the send to complete: OnSendCompleted reports that.
func (s *SendEndpointBuffered) Flush() netio.Status {
	co := s.co
	if co == nil {
		return netio.InvalidArgument
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.closed {
		return netio.Closed
	}
	return co.post(flushExplicit)
}

// CoalesceStats returns the coalescing counters; all zero when the endpoint
// is not coalescing.
func (s *SendEndpointBuffered) CoalesceStats() CoalesceStats {
	co := s.co
	if co == nil {
		return CoalesceStats{}
	}
	co.mu.Lock()
	defer co.mu.Unlock()
	f := co.flushes
	return CoalesceStats{Messages: co.msgs, Bytes: co.bytes, Pending: uint64(co.enc.Count()),
		Buffers:     f[flushFull] + f[flushInterval] + f[flushExplicit] + f[flushClose],
		FullFlushes: f[flushFull], IntervalFlushes: f[flushInterval], ExplicitFlushes: f[flushExplicit],
		CloseFlushes: f[flushClose], Dropped: co.dropped}
}

// reserve makes room for a message with an n-byte payload and returns where
// the payload goes, posting the current buffer first when the message does
// not fit in it. On any status but OK nothing was taken and dst is nil.
// co.mu is held.
func (co *coalescer) reserve(tag uint64, status uint8, n int) (dst []byte, st netio.Status) {
	switch {
	case n > co.maxLen-coalesce.Overhead(status, true):
		return nil, netio.InvalidArgument // checked first: it fits in no buffer, free or not
	case co.closed || co.s.c.Ended():
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
	if co.cur = co.s.take(); co.cur == nil {
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
func (co *coalescer) taken(dst []byte) []byte {
	co.msgs++
	co.bytes += uint64(len(dst))
	return dst
}

// post sends the current buffer, if any, and counts why. On failure the
// buffer stays current with its messages. co.mu is held.
func (co *coalescer) post(cause flushCause) netio.Status {
	if co.cur == nil {
		return netio.OK
	}
	if st := co.s.post(co.cur, co.enc.Len(), co.cur.ID()); st != netio.OK {
		return st
	}
	co.sentMsgs.Add(uint64(co.enc.Count()))
	co.sentBufs.Add(1)
	co.cur = nil
	co.enc.Reset(nil)
	co.flushes[cause]++
	return netio.OK
}

// run is the flusher goroutine: it posts the current buffer once its first
// message is FlushInterval old. The timer is armed by a buffer's first
// message and not moved while buffers fill faster than the interval, so a
// busy stream costs one timer per interval, not one per buffer.
func (co *coalescer) run() {
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
func (co *coalescer) flushDue() {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.armed = false
	if co.cur == nil || co.closed {
		return
	}
	wait := co.interval - time.Since(co.first)
	if wait <= 0 {
		switch co.post(flushInterval) {
		case netio.OK, netio.Closed: // Closed: the teardown drops and counts them
			return
		}
		wait = min(co.interval, flushRetry) // queue full or post refused: try again
	}
	co.armed = true
	co.timer.Reset(wait)
}

// flushOnClose posts the current buffer as Close begins; what cannot be
// posted is dropped and counted when the connection ends.
func (s *SendEndpointBuffered) flushOnClose() {
	co := s.co
	if co == nil {
		return
	}
	co.mu.Lock()
	if !co.closed {
		if st := co.post(flushClose); st != netio.OK {
			s.c.Log.Warn().Stringer("status", st).Int("messages", co.enc.Count()).Msg("close: could not post the coalesced buffer")
		}
	}
	co.mu.Unlock()
}

// endCoalescing stops coalescing for good when the connection ends or the
// dial fails: it takes nothing more, drops the messages of a buffer not
// posted (counted and logged, and the buffer goes back), and waits for the
// flusher goroutine to return. It is idempotent.
func (s *SendEndpointBuffered) endCoalescing() {
	co := s.co
	if co == nil {
		return
	}
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
func (co *coalescer) dropCurrent() {
	if co.cur == nil {
		return
	}
	n := co.enc.Count()
	co.dropped += uint64(n)
	co.droppedMsgs.Add(uint64(n))
	co.s.c.Log.Warn().Str("peer", co.s.c.addr).Int("messages", n).Int("bytes", co.enc.Len()).
		Msg("coalesced messages dropped: the connection ended before they were posted")
	co.s.set.Release(uint32(co.cur.ID()), co.s.holder)
	co.cur = nil
	co.enc.Reset(nil)
}
