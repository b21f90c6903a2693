package endpoint

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/stats"
)

// DialReplies lets a dialled connection carry messages back from the
// listener's side (ReceiveEndpoint.SendBuffer, with
// ListenConfig.Replies): request/reply, or commands back to a front-end,
// on one connection instead of a second one dialled the other way. The
// endpoint keeps Params.BufferCount receive buffers of Params.BufferSize
// bytes posted, registered for receiving only, and passes every message
// to OnReply. After the peer's shutdown it keeps delivering what the
// provider still holds until no reply has come for a quiet period, as an
// accepted connection does, then ends with netio.ErrConnectionClosed.
type DialReplies struct {
	// Params sets the size and number of the receive buffers; defaults
	// apply to zero fields. A reply larger than Params.BufferSize is lost
	// (counted in SendStats.ReceiveErrors, logged and reported to
	// OnReplyError), and the provider may end the connection
	// (quirks.Quirks.TruncationDrops): OnConnectionClosed's error then
	// also matches fabric.ETRUNC and names the reply buffer size.
	Params netio.ReceiveParams
	// OnReply is called for every message the peer sends back. data is
	// valid only during the call: the buffer is posted again as soon as
	// OnReply returns, so copy what you keep. It runs on the poller
	// goroutine and must not block; it may send (SendBuffer) and Close.
	// It may run before Dial returns (a reply can be read before the
	// provider reports the connection up), with the endpoint Dial is about
	// to return; a Close then makes Dial fail with netio.ErrClosed.
	// Required.
	OnReply func(ep *SendEndpointBuffered, data []byte)
	// OnReplyError is called for a reply that completed with an error (a
	// reply larger than Params.BufferSize, for example): the reply is lost
	// and this is how the loss is reported, as ListenConfig.OnReceiveError
	// does on the accepted side. It runs on the poller goroutine and must
	// not block. May be nil; the error is logged in any case.
	OnReplyError func(ep *SendEndpointBuffered, err error)
}

// validate checks c, with defaults applied, against mgr's provider.
func (c *DialReplies) validate(mgr *domain.Manager) error {
	if c.OnReply == nil {
		return fmt.Errorf("%w: endpoint: DialReplies without OnReply", netio.ErrInvalidArgument)
	}
	c.Params = c.Params.WithDefaults()
	if err := c.Params.Validate(); err != nil {
		return fmt.Errorf("endpoint: DialReplies: %w", err)
	}
	if rx := mgr.Info().RxSize(); rx > 0 && c.Params.BufferCount > rx {
		return fmt.Errorf("%w: endpoint: DialReplies: %d receive buffers, but %s keeps at most %d posted",
			netio.ErrInvalidArgument, c.Params.BufferCount, mgr.Provider(), rx)
	}
	return nil
}

// checkReplies validates cfg.Replies on a copy, so that the caller's
// config stays as it was.
func (c *SendConfig) checkReplies(mgr *domain.Manager) error {
	if c.Replies == nil {
		return nil
	}
	r := *c.Replies
	if err := r.validate(mgr); err != nil {
		return err
	}
	c.Replies = &r
	return nil
}

// replyInbox is a dialled connection's receive half: the inbox every
// connected endpoint receives with, and its counters.
type replyInbox struct {
	cfg                     *DialReplies
	in                      inbox
	onReply                 func(data []byte) // OnReply with the endpoint, bound once
	messages, bytes, errors atomic.Uint64
	truncated               atomic.Bool // a reply larger than the buffers came
}

// openReplies registers the reply buffers when SendConfig.Replies asks
// for them. It runs once the owner exists, before the endpoint is open.
func (s *SendEndpointBuffered) openReplies() error {
	cfg := s.cfg.Replies
	if cfg == nil {
		return nil
	}
	owner := s.c.Owner
	ctx := func(i uint32) uint64 { return owner.Context(reverseKeyFlag | i) }
	r := &replyInbox{cfg: cfg, onReply: func(data []byte) { cfg.OnReply(s, data) }}
	if err := r.in.open(s.c.Mgr, nil, cfg.Params.BufferSize, cfg.Params.BufferCount, ctx, s.c.Log); err != nil {
		return err
	}
	s.replies = r
	return nil
}

// postReplies posts every reply buffer on the endpoint, enabled and not
// yet connected, so that nothing the peer sends back finds none posted.
func (s *SendEndpointBuffered) postReplies(ep *fabric.Endpoint) error {
	if s.replies == nil {
		return nil
	}
	if err := s.replies.in.postAll(ep); err != nil {
		return fmt.Errorf("endpoint: replies: %w", err)
	}
	return nil
}

// onReply passes a received reply to OnReply and posts its buffer again.
// It runs on the poller goroutine.
func (s *SendEndpointBuffered) onReply(i uint32, res poll.Result) {
	r := s.replies
	if r == nil || s.c.Ended() {
		return // closing: the buffers are going away
	}
	if res.Status != netio.OK {
		if res.Status == netio.Canceled {
			return
		}
		r.errors.Add(1)
		err := fmt.Errorf("%w: reply of %d bytes: %w", netio.ErrFailed, res.Len, res.Errno)
		if errors.Is(res.Errno, fabric.ETRUNC) {
			r.truncated.Store(true)
			err = fmt.Errorf("%w: a reply larger than the %d-byte reply buffers: %w", netio.ErrFailed, r.cfg.Params.BufferSize, res.Errno)
		}
		s.c.Log.Warn().Str("peer", s.c.addr).Err(err).Msg("reply receive failed")
		if cb := r.cfg.OnReplyError; cb != nil {
			cb(s, err)
		}
	} else {
		r.messages.Add(1)
		r.bytes.Add(uint64(res.Len))
		s.c.drain.received()
		if !r.in.deliver(i, res.Len, r.onReply) {
			return // OnReply closed the endpoint; its buffers are freed
		}
	}
	s.repostReply(i)
}

// repostReply posts reply buffer i again, unless the endpoint has ended.
func (s *SendEndpointBuffered) repostReply(i uint32) {
	ep, ok := s.c.Guard.Acquire()
	if !ok {
		return
	}
	defer s.c.Guard.Release()
	if s.c.Ended() {
		return
	}
	if errno := s.replies.in.repost(ep, i); errno != 0 {
		s.replies.errors.Add(1)
		s.c.Log.Error().Str("peer", s.c.addr).Err(errno).Msg("reposting reply buffer")
	}
}

// fillReplies adds the reply counters to the endpoint's record.
func (s *SendEndpointBuffered) fillReplies(e *stats.Endpoint) {
	if r := s.replies; r != nil {
		e.MessagesReceived, e.BytesReceived, e.ReceiveErrors = r.messages.Load(), r.bytes.Load(), r.errors.Load()
	}
}

// replyStats adds the reply counters to st.
func (s *SendEndpointBuffered) replyStats(st SendStats) SendStats {
	if r := s.replies; r != nil {
		st.Received, st.ReceivedBytes, st.ReceiveErrors = r.messages.Load(), r.bytes.Load(), r.errors.Load()
	}
	return st
}

// freeReplies frees the reply buffers once the endpoint is closed (after
// OnReply returns when it is under way).
func (s *SendEndpointBuffered) freeReplies() error {
	if s.replies == nil {
		return nil
	}
	return s.replies.in.free()
}

// replyClosed wraps OnConnectionClosed so that a connection the provider
// dropped after a reply too large for the reply buffers
// (quirks.Quirks.TruncationDrops) names the truncation as its cause, as
// ReceiveEndpoint.peerClosed does on the accepted side. A local Close or a
// progress timeout keeps its own reason.
func (s *SendEndpointBuffered) replyClosed(onClosed func(error)) func(error) {
	if onClosed == nil || s.cfg.Replies == nil {
		return onClosed
	}
	return func(reason error) {
		if r := s.replies; r != nil && r.truncated.Load() &&
			errors.Is(reason, netio.ErrConnectionClosed) && !errors.Is(reason, netio.ErrTimeout) {
			reason = fmt.Errorf("%w (after a reply larger than the %d-byte reply buffers: %w)",
				reason, r.cfg.Params.BufferSize, fabric.ETRUNC)
		}
		onClosed(reason)
	}
}
