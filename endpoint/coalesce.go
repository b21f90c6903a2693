package endpoint

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/coalescer"
	"github.com/netio-go/netio/sendbuf"
)

// DefaultCoalesceFlushInterval is how long a coalesced buffer waits at most
// for more messages when CoalesceConfig.FlushInterval is 0.
const DefaultCoalesceFlushInterval = coalescer.DefaultFlushInterval

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

// startCoalescing sets up coalescing when the config asks for it. It runs
// once the buffers exist, while dialling.
func (s *SendEndpointBuffered) startCoalescing() {
	if cfg := s.cfg.Coalesce; cfg != nil {
		s.co = coalescer.New((*coalesceTarget)(s), s.pool.BufferSize(), cfg.FlushInterval, s.c.Log, s.c.addr)
	}
}

// coalesceTarget is the coalescer's view of a SendEndpointBuffered.
type coalesceTarget SendEndpointBuffered

func (t *coalesceTarget) Take() *sendbuf.NetworkBuffer { return (*SendEndpointBuffered)(t).take() }
func (t *coalesceTarget) Post(buf *sendbuf.NetworkBuffer, n int) netio.Status {
	return (*SendEndpointBuffered)(t).post(buf, n, buf.ID(), false)
}

// PostLast posts the close flush the regular way (sendcore.Core.SendRegular):
// an inject of it could be refused for SendConfig.MaxInjectsHeld, and no
// retry follows a Close.
func (t *coalesceTarget) PostLast(buf *sendbuf.NetworkBuffer, n int) netio.Status {
	return (*SendEndpointBuffered)(t).post(buf, n, buf.ID(), true)
}
func (t *coalesceTarget) Release(buf *sendbuf.NetworkBuffer) {
	t.set.Release(uint32(buf.ID()), t.holder)
}
func (t *coalesceTarget) Ended() bool { return t.c.Ended() }

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
	if s.co == nil {
		return netio.InvalidArgument
	}
	return s.co.Send(tag, status, parts...)
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
	if s.co == nil {
		return netio.InvalidArgument
	}
	return s.co.Flush()
}

// CoalesceStats returns the coalescing counters; all zero when the endpoint
// is not coalescing.
func (s *SendEndpointBuffered) CoalesceStats() CoalesceStats {
	if s.co == nil {
		return CoalesceStats{}
	}
	return CoalesceStats(s.co.Stats())
}

// flushOnClose posts the current buffer as Close begins; what cannot be
// posted is dropped and counted when the connection ends.
func (s *SendEndpointBuffered) flushOnClose() {
	if s.co != nil {
		s.co.FlushOnClose()
	}
}

// endCoalescing stops coalescing for good when the connection ends or the
// dial fails (coalescer.Coalescer.End). It is idempotent.
func (s *SendEndpointBuffered) endCoalescing() {
	if s.co != nil {
		s.co.End()
	}
}
