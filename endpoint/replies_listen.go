package endpoint

import (
	"fmt"
	"math"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/sendbuf"
)

// reverseKeyFlag marks a completion of a connection's other direction: a
// send on an accepted connection (ListenReplies), a receive on a dialled
// one (DialReplies). Buffer indexes stay far below it, and it is apart
// from rmaKeyFlag and rmaLastFlag.
const reverseKeyFlag = uint32(1) << 29

// isReverseKey reports whether a completion key has reverseKeyFlag.
func isReverseKey(key uint32) bool { return key&(reverseKeyFlag|rmaKeyFlag) == reverseKeyFlag }

// ListenReplies lets every accepted connection send back to its dialer on
// the same connection (request/reply, commands back to a front-end): each
// ReceiveEndpoint gets Params.BufferCount send buffers of Params.BufferSize
// bytes of its own, registered when the connection is accepted, and
// GetBuffer, SendBuffer and ReleaseBuffer. They are simpler than a
// SendEndpointBuffered's: SendBuffer always posts from the calling
// goroutine (no HandOffSize hand-off, no inject) and there is no
// NumAvailableBuffers. The dialer receives them with SendConfig.Replies.
type ListenReplies struct {
	// Params sets the size and number of each connection's send buffers;
	// defaults apply to zero fields.
	Params netio.BufferedSendParams
	// OnSendCompleted is called once per buffer handed to SendBuffer, with
	// its ID as the key: OK when the provider completed the send, Failed
	// for an error completion, Canceled when the connection ended first
	// (reported before OnConnectionClosed; a connection that ends while
	// still connecting gets no OnConnectionClosed, so its Canceled reports
	// come alone). The buffer is back with the connection when it runs. It
	// runs on the poller goroutine, also when Listener.Close or
	// ReceiveEndpoint.Close ended the connection, and must not block. May
	// be nil.
	OnSendCompleted func(ep *ReceiveEndpoint, key uint64, status netio.Status)
	// ProgressTimeout ends a connection whose replies are pending and none
	// has completed for this long (a dialer that stopped taking data), as
	// SendConfig.ProgressTimeout does for a dialled sender: its pending
	// replies are reported Canceled and OnConnectionClosed gets an error
	// matching netio.ErrConnectionClosed and netio.ErrTimeout, within about
	// 1.25 × ProgressTimeout. 0 disables it; negative is refused.
	ProgressTimeout time.Duration
}

func (c *ListenReplies) validate() error {
	if c == nil {
		return nil
	}
	c.Params = c.Params.WithDefaults()
	if err := c.Params.Validate(); err != nil {
		return fmt.Errorf("endpoint: ListenReplies: %w", err)
	}
	if err := checkProgressTimeout(c.ProgressTimeout); err != nil {
		return fmt.Errorf("endpoint: ListenReplies: %w", err)
	}
	return nil
}

// replySender is an accepted connection's send half: the send core's
// buffers and counters, posting through the connection's Guard.
type replySender struct {
	cfg      *ListenReplies
	holder   uint64
	bufs     sendcore.Buffers
	counters sendcore.Counters
	pending  []uint32    // poller goroutine only: reused by cancel
	watch    *time.Timer // ProgressTimeout's check; set once connected
}

// openReplies sets up the send half when ListenConfig.Replies asks for it.
func (r *ReceiveEndpoint) openReplies() error {
	cfg := r.l.cfg.Replies
	if cfg == nil {
		return nil
	}
	s := &replySender{cfg: cfg, holder: sendcore.NewHolder()}
	var err error
	if s.bufs, err = sendcore.OpenBuffers(sendbuf.Source{}, r.l.mgr, cfg.Params); err != nil {
		return err
	}
	r.out = s
	return nil
}

// GetBuffer leases a free send buffer of the connection, or returns nil
// when none is free, the connection has ended, or the listener has no
// ListenConfig.Replies. Fill buf.Bytes() and pass it to SendBuffer, or give
// it back with ReleaseBuffer.
func (r *ReceiveEndpoint) GetBuffer() *sendbuf.NetworkBuffer {
	s := r.out
	if s == nil || r.state.Load() == stateClosed {
		return nil
	}
	id, ok := s.bufs.Set.Take(s.holder)
	if !ok {
		return nil
	}
	if r.state.Load() == stateClosed { // raced the end: teardown reclaims nothing leased after it
		s.bufs.Set.Release(id, s.holder)
		return nil
	}
	return s.bufs.Pool.Lookup(uint64(id))
}

// SendBuffer sends the first size bytes of buf to the dialer as one
// message and hands buf to the connection until its completion
// (ListenReplies.OnSendCompleted). It returns OK when posted; NoResources
// when the transmit queue is full (the caller keeps buf and may retry);
// InvalidArgument for a buffer not leased from this connection, a size
// outside 0..buf.Size(), or a listener without ListenConfig.Replies;
// Closed once the connection has ended; Failed when the provider refuses
// the post. It does not allocate. It may be called from any goroutine,
// OnData included.
func (r *ReceiveEndpoint) SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	s := r.out
	if s == nil || buf == nil || !s.bufs.Pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	ep, ok := r.post.Acquire()
	if !ok {
		return netio.Closed
	}
	defer r.post.Release()
	id := uint32(buf.ID())
	if !s.bufs.Set.MarkPosted(id, s.holder, buf.ID()) {
		return netio.InvalidArgument
	}
	// Counted here, not by a sendcore.Core: before the post, so Completed
	// never passes Sent (sendcore.Counters.Posted).
	s.counters.Posted(size)
	if errno := ep.Send(buf.Addr(), size, buf.Desc(), r.owner.Context(reverseKeyFlag|id)); errno != 0 {
		s.counters.Unposted(size)
		s.bufs.Set.Unpost(id, s.holder)
		return sendcore.PostStatus(errno)
	}
	return netio.OK
}

// ReleaseBuffer gives back a leased send buffer that was not sent and
// returns its key (the buffer ID). It reports InvalidArgument, changing
// nothing, for an unknown ID, a buffer not leased from this connection
// (already released, or in flight), or a listener without
// ListenConfig.Replies.
func (r *ReceiveEndpoint) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	s := r.out
	if s == nil || id > math.MaxUint32 || !s.bufs.Set.Release(uint32(id), s.holder) {
		return id, netio.InvalidArgument
	}
	return id, netio.OK
}

// SendStats returns the counters of what the connection sent back; zero
// without ListenConfig.Replies.
func (r *ReceiveEndpoint) SendStats() SendStats {
	if r.out == nil {
		return SendStats{}
	}
	return sendStats(r.out.counters.Read())
}

// sent reports a send's completion once. It runs on the poller goroutine.
func (r *ReceiveEndpoint) sent(id uint32, res poll.Result) {
	s := r.out
	if s == nil {
		return
	}
	key, ok := s.bufs.Set.Complete(id, s.holder)
	if !ok {
		return // reported Canceled already
	}
	s.counters.Finished(res.Status, 1)
	if res.Status != netio.OK {
		r.l.log.Warn().Uint64("conn", r.id).Uint64("key", key).Stringer("status", res.Status).Err(res.Errno).Msg("send failed")
	}
	if cb := s.cfg.OnSendCompleted; cb != nil {
		cb(r, key, res.Status)
	}
}

// watchReplies ends the connection when replies stay pending without one
// completing for ListenReplies.ProgressTimeout. It runs on the poller
// goroutine, once connected.
func (r *ReceiveEndpoint) watchReplies() {
	s := r.out
	if s == nil || s.cfg.ProgressTimeout == 0 {
		return
	}
	timeout := s.cfg.ProgressTimeout
	ended := func() bool { return r.state.Load() == stateClosed }
	s.watch = sendcore.StallWatch(r.l.poller, timeout, s.counters.Progress, ended, func() {
		reason := fmt.Errorf("%w: %w: no reply completed for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		r.l.log.Warn().Uint64("conn", r.id).Str("peer", r.peer).Dur("timeout", timeout).Msg("reply progress timeout: closing the connection")
		r.l.poller.Do(func() { r.teardown(reason) })
	})
}

// cancelSends reports every send in flight as Canceled and gives the
// buffers back. The endpoint is closed, so the provider holds none of
// them. Every key is claimed before the first callback, so a callback
// finds nothing left to report. It runs on the poller goroutine.
func (r *ReceiveEndpoint) cancelSends() {
	s := r.out
	if s == nil {
		return
	}
	s.pending = s.bufs.Set.Posted(s.pending[:0], s.holder)
	keys := make([]uint64, 0, len(s.pending))
	for _, id := range s.pending {
		if key, ok := s.bufs.Set.Complete(id, s.holder); ok {
			keys = append(keys, key)
		}
	}
	if s.watch != nil {
		s.watch.Stop()
	}
	s.counters.Finished(netio.Canceled, len(keys))
	if cb := s.cfg.OnSendCompleted; cb != nil {
		for _, k := range keys {
			cb(r, k, netio.Canceled)
		}
	}
	if err := s.bufs.Close(s.holder); err != nil {
		r.l.log.Error().Err(err).Msg("freeing send buffers")
	}
}
