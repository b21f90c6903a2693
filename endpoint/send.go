package endpoint

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// SendConfig configures a buffered send endpoint.
type SendConfig struct {
	// Params sets the buffer size and count (defaults apply to zero fields)
	// and whether buffers come from SharedBuffers.
	Params netio.BufferedSendParams
	// SharedBuffers is the pool shared by endpoints of one domain. Required
	// when Params.UseSharedBuffers is set; it must belong to the same
	// domain.
	SharedBuffers *sendbuf.SendBufferManager
	// Buffers, when set, is where the endpoint leases its Params.BufferCount
	// send buffers of at least Params.BufferSize bytes when it dials,
	// instead of registering a region of its own: a free buffer, else a
	// new one within the pool's Budget (pool.Pool.GetOrExtend); Dial fails
	// with an error wrapping netio.ErrNoResources when the pool cannot
	// supply them all. Buffer IDs, keys and every other part of the
	// contract stay the same. The leases go back at Close; a buffer the
	// caller still holds goes back when the caller releases it
	// (ReleaseBuffer) or, failing that, once it and the endpoint are
	// unreachable (see sendbuf.Pool.Close). The pool must belong to the
	// endpoint's domain and be registered with domain.AccessSend; it
	// excludes Params.UseSharedBuffers. The caller closes it after the
	// endpoint.
	Buffers *pool.Pool
	// OnSendCompleted is called once per buffer handed to SendBuffer (or
	// posted by coalescing), with its key (the buffer ID) and the outcome:
	// OK when the provider completed the send, Failed for an error
	// completion or for a send queued for the poller (HandOffSize) that the
	// provider then refused to take, Canceled when the endpoint closed
	// first. The buffer is back in the pool when it runs. It runs on the
	// poller goroutine and must not block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnConnectionClosed is called once when the connection ends: with
	// netio.ErrClosed after Close, or an error matching
	// netio.ErrConnectionClosed when the peer shut down or the connection
	// broke (also netio.ErrTimeout when ProgressTimeout ended it). It runs
	// on the poller goroutine and must not block. May be nil.
	OnConnectionClosed func(err error)
	// DeliveryComplete makes a send complete (OnSendCompleted with OK) only
	// once the message is in a posted receive buffer of the peer, not when
	// the provider has taken it: a message lost because the peer closed the
	// connection is then reported, never counted as sent. A peer process
	// killed after placement but before OnData ran can still lose up to its
	// posted buffers' worth; only an application acknowledgement covers
	// that. It costs an acknowledgement per message. libfabric 1.17's tcp
	// honours it; on other providers Dial fails with netio.ErrNotSupported
	// (sockets completes sends once it has buffered them whatever is asked).
	DeliveryComplete bool
	// ProgressTimeout ends the connection when sends are pending and none
	// has completed for this long: a peer or link that stopped taking data
	// (a cable pulled, a host hung) then fails the pending sends with their
	// keys within about 1.25 × ProgressTimeout instead of after the
	// kernel's TCP retransmission limit (many minutes). OnConnectionClosed
	// gets an error matching netio.ErrConnectionClosed and netio.ErrTimeout.
	// Set it well above the longest stall a healthy receiver may impose
	// (back-pressure). 0 disables it. On sockets it fires only when the
	// provider itself stops taking data: sockets completes sends once it has
	// buffered them, and buffers what a stalled peer leaves.
	ProgressTimeout time.Duration
	// Coalesce, when set, turns on small-message coalescing: SendMessage,
	// SendMessageV, SendMessageStatus and Flush pack messages into the
	// endpoint's buffers in netio3's format, for a peer that decodes them
	// (ListenConfig.OnMessage). The endpoint then owns its buffers, so
	// GetBuffer, SendBuffer and ReleaseBuffer refuse. See CoalesceConfig.
	Coalesce *CoalesceConfig
	// Poller is an event loop to share with other endpoints; the caller
	// closes it after the endpoints. Nil gives the endpoint its own,
	// configured by PollerConfig and closed with it.
	Poller *cq.Poller
	// PollerConfig configures the endpoint's own poller.
	PollerConfig cq.Config
	// Logger receives connection messages. The zero value logs nothing.
	Logger zerolog.Logger
}

func (c *SendConfig) validate(mgr *domain.Manager) error {
	if mgr == nil {
		return fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	}
	c.Params = c.Params.WithDefaults()
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if err := checkProgressTimeout(c.ProgressTimeout); err != nil {
		return err
	}
	if err := c.Coalesce.validate(); err != nil {
		return err
	}
	if c.Buffers != nil {
		if c.Params.UseSharedBuffers {
			return fmt.Errorf("%w: endpoint: both Buffers and UseSharedBuffers: pick one source of send buffers", netio.ErrInvalidArgument)
		}
		return checkBufferPool(c.Buffers, mgr, domain.AccessSend)
	}
	if c.Params.UseSharedBuffers {
		if c.SharedBuffers == nil {
			return fmt.Errorf("%w: endpoint: UseSharedBuffers without SharedBuffers", netio.ErrInvalidArgument)
		}
		if c.SharedBuffers.Domain() != mgr {
			return fmt.Errorf("%w: endpoint: shared buffers belong to another domain", netio.ErrInvalidArgument)
		}
	}
	return nil
}

// nextHolder gives every endpoint a process-wide identity in buffer pools,
// which may be shared by endpoints of different pollers.
var nextHolder atomic.Uint64

// SendStats counts what a send endpoint did.
type SendStats struct {
	Sent      uint64 // messages posted, or queued for the poller to post (HandOffSize)
	Bytes     uint64 // bytes posted
	Completed uint64 // sends completed OK
	Failed    uint64 // sends that completed with an error or were canceled
}

// sendCounters are the counters of both send endpoint kinds.
type sendCounters struct {
	sent, bytes, completed, failed atomic.Uint64
}

// posted counts a send of n bytes.
func (c *sendCounters) posted(n int) {
	c.sent.Add(1)
	c.bytes.Add(uint64(n))
}

// unposted takes back a count for a post the provider refused.
func (c *sendCounters) unposted(n int) {
	c.sent.Add(^uint64(0))
	c.bytes.Add(^uint64(n - 1))
}

// finished counts n sends that ended with st.
func (c *sendCounters) finished(st netio.Status, n int) {
	if st == netio.OK {
		c.completed.Add(uint64(n))
	} else {
		c.failed.Add(uint64(n))
	}
}

// stats reads the finished counters first: Sent only grows and is counted
// before each post, so the snapshot never shows more finished than sent.
func (c *sendCounters) stats() SendStats {
	completed, failed := c.completed.Load(), c.failed.Load()
	return SendStats{Sent: c.sent.Load(), Bytes: c.bytes.Load(), Completed: completed, Failed: failed}
}

// SendEndpointBuffered sends messages from registered buffers (netio3's
// SendEndpointBuffered): GetBuffer, fill, SendBuffer; the completion returns
// the buffer and reports its ID as the key. With SendConfig.Coalesce it
// packs small messages into those buffers instead (SendMessage).
type SendEndpointBuffered struct {
	c        sendConn
	cfg      SendConfig
	holder   uint64 // identity in the buffer pool, unique in the process
	pool     *sendbuf.Pool
	ownPool  bool
	counters sendCounters
	co       *coalescer // nil unless SendConfig.Coalesce is set
}

// Dial connects to the listener at addr ("HOST:PORT") through mgr's domain
// and returns a buffered send endpoint. It honours ctx's deadline and
// cancellation, and applies DefaultDialTimeout when ctx has no deadline. A
// refused connection matches netio.ErrConnectionRefused.
//
// The endpoint asks the provider for messages only (FI_MSG), so that a
// listener that asked for no more, such as a plain C libfabric server, accepts
// it on sockets too. The peer may still Pull from and Push into regions
// exposed on this side: tcp and sockets check those against the
// registration's access, not the endpoint's capabilities.
func Dial(ctx context.Context, mgr *domain.Manager, addr string, cfg SendConfig) (*SendEndpointBuffered, error) {
	if err := cfg.validate(mgr); err != nil {
		return nil, err
	}
	host, port, err := splitAddr(addr, false)
	if err != nil {
		return nil, err
	}
	s := &SendEndpointBuffered{cfg: cfg, holder: nextHolder.Add(1)}
	s.c = sendConn{mgr: mgr, addr: addr, kind: s}
	opts := connOptions{poller: cfg.Poller, pollerConfig: cfg.PollerConfig, log: cfg.Logger, onClosed: cfg.OnConnectionClosed,
		deliveryComplete: cfg.DeliveryComplete, progressTimeout: cfg.ProgressTimeout}
	if err := s.c.dial(ctx, host, port, opts, s.prepare); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare sets up the buffers, and the coalescing over them when asked.
func (s *SendEndpointBuffered) prepare() error {
	if err := s.openPool(); err != nil {
		return err
	}
	s.c.initHandOff(s.pool.Len(), s.postSend)
	s.startCoalescing()
	return nil
}

func (s *SendEndpointBuffered) openPool() error {
	if s.cfg.Params.UseSharedBuffers {
		if err := s.cfg.SharedBuffers.Attach(); err != nil {
			return err
		}
		s.pool = s.cfg.SharedBuffers.Pool()
		return nil
	}
	var bufs *sendbuf.Pool
	var err error
	if s.cfg.Buffers != nil {
		bufs, err = sendbuf.NewPoolFrom(s.cfg.Buffers, s.cfg.Params.BufferSize, s.cfg.Params.BufferCount)
	} else {
		bufs, err = sendbuf.NewPool(s.c.mgr, s.cfg.Params.BufferSize, s.cfg.Params.BufferCount)
	}
	if err != nil {
		return err
	}
	s.pool, s.ownPool = bufs, true
	return nil
}

// GetBuffer leases a free registered buffer, or returns nil when none is
// free, the endpoint is closed, or it is coalescing. Fill buf.Bytes() and
// pass it to SendBuffer, or give it back with ReleaseBuffer.
func (s *SendEndpointBuffered) GetBuffer() *sendbuf.NetworkBuffer {
	if s.co != nil || s.c.ended.Load() {
		return nil
	}
	return s.pool.Get(s.holder)
}

// SendBuffer sends the first size bytes of buf as one message and hands buf
// to the endpoint until its completion. It returns OK when posted;
// NoResources when the transmit queue is full (the caller keeps buf and may
// retry); InvalidArgument for a buffer not leased from this endpoint, a
// size outside 0..buf.Size(), or a coalescing endpoint; Closed after Close
// or connection loss; Failed when the provider refuses the post. It does
// not allocate.
//
// A message of HandOffSize bytes or more, and any message sent while one
// is still waiting, is posted by the poller goroutine rather than by the
// caller (see HandOffSize for why): OK then means queued, in order, and a
// post the provider refuses comes back through OnSendCompleted with
// Failed, as an error completion would. Messages are sent in the order of
// the SendBuffer calls that returned OK either way.
func (s *SendEndpointBuffered) SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	if s.co != nil || !s.pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	return s.post(buf, size)
}

// post sends the first size bytes of buf, one of the pool's buffers: from
// the calling goroutine, or through the poller goroutine for a large
// message or one that must not overtake those queued there (sendConn.send).
func (s *SendEndpointBuffered) post(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	ep, ok := s.c.guard.acquire()
	if !ok {
		return netio.Closed
	}
	defer s.c.guard.release()
	if !s.pool.MarkPosted(buf, s.holder) {
		return netio.InvalidArgument
	}
	s.counters.posted(size) // before the post, so Completed never passes Sent
	if st := s.c.send(ep, uint32(buf.ID()), size, size); st != netio.OK {
		s.counters.unposted(size)
		s.pool.Unpost(buf)
		return st
	}
	return netio.OK
}

// postSend posts buffer key's first n bytes. It runs on the caller's
// goroutine, or on the poller goroutine for a queued send.
func (s *SendEndpointBuffered) postSend(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
	buf := s.pool.Lookup(uint64(key))
	return ep.Send(buf.Addr(), n, buf.Desc(), s.c.owner.Context(key))
}

// ReleaseBuffer gives back a leased buffer that was not sent and returns its
// key (the buffer ID). It reports InvalidArgument, changing nothing, for an
// unknown ID or a buffer not leased from this endpoint (already released,
// or in flight), and on a coalescing endpoint, whose buffers it holds.
func (s *SendEndpointBuffered) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	if s.co != nil {
		return id, netio.InvalidArgument
	}
	return id, s.pool.Release(id, s.holder)
}

// NumAvailableBuffers returns the fewest free buffers seen since the
// previous call (netio3's get_num_available_buffers). With shared buffers
// it speaks for the shared pool.
func (s *SendEndpointBuffered) NumAvailableBuffers() int { return s.pool.NumAvailable() }

// PendingSends returns the keys of the sends in flight. It allocates; use it
// for diagnostics, not on the hot path.
func (s *SendEndpointBuffered) PendingSends() []uint64 { return s.pool.Posted(nil, s.holder) }

// BufferSize returns the size of each send buffer: the largest message.
func (s *SendEndpointBuffered) BufferSize() int { return s.pool.BufferSize() }

// RemoteAddr returns the address the endpoint was dialled with.
func (s *SendEndpointBuffered) RemoteAddr() string { return s.c.addr }

// Stats returns the endpoint's counters.
func (s *SendEndpointBuffered) Stats() SendStats { return s.counters.stats() }

// Close ends the connection: the peer sees it closed, every pending key is
// reported with Canceled, every buffer goes back, and the endpoint's own
// poller stops. Buffers the caller leased and did not send are taken back
// too: SendBuffer refuses them, and their memory stays mapped while the
// caller holds them, so a late write is harmless. Buffers from
// SendConfig.Buffers go back to that pool, those the caller holds once
// released with ReleaseBuffer or unreachable. It is idempotent and may be
// called from a callback.
//
// A send reported OK has been taken by the provider, which is not always
// the peer: sockets completes sends once it has staged them, and Close
// discards what it still stages, so a receiver that is behind can miss
// messages reported OK (measured: up to 77% of 1000 when the receiver took
// 3 ms per message and the sender closed at once). Where every message
// counts, use tcp with DeliveryComplete, or have the receiver acknowledge.
//
// On a coalescing endpoint Close first posts the current buffer, as Flush
// would; like every send still pending it is then reported through
// OnSendCompleted, with OK or Canceled (a canceled send may or may not
// have reached the peer: Flush and wait for the completion first to know).
// Messages that cannot be posted (the transmit queue is full, the
// connection is gone, or a SendMessage raced with Close) are dropped,
// logged, and counted in CoalesceStats.Dropped; never lost silently.
func (s *SendEndpointBuffered) Close() error {
	s.flushOnClose()
	return s.c.close()
}

// handleCompletion returns the buffer and reports its key. It runs on the
// poller goroutine.
func (s *SendEndpointBuffered) handleCompletion(key uint32, r cq.Result) {
	if !s.pool.Complete(uint64(key), s.holder) {
		return // already reported by cancelPending
	}
	s.counters.finished(r.Status, 1)
	if r.Status != netio.OK {
		s.c.log.Warn().Uint32("key", key).Stringer("status", r.Status).Err(r.Errno).Msg("send failed")
	}
	if cb := s.cfg.OnSendCompleted; cb != nil {
		cb(uint64(key), r.Status)
	}
}

// cancelPending returns every buffer in flight first, then reports each:
// a callback that calls Close finds the pool whole.
func (s *SendEndpointBuffered) cancelPending() {
	s.endCoalescing() // first: a callback below finds it closed
	pending := s.pool.Posted(nil, s.holder)
	canceled := pending[:0]
	for _, id := range pending {
		if s.pool.Complete(id, s.holder) {
			canceled = append(canceled, id)
		}
	}
	s.counters.finished(netio.Canceled, len(canceled))
	if cb := s.cfg.OnSendCompleted; cb != nil {
		for _, id := range canceled {
			cb(id, netio.Canceled)
		}
	}
}

// releaseResources gives the buffers back: a pool of its own is closed, a
// shared one keeps them.
func (s *SendEndpointBuffered) releaseResources() error {
	s.endCoalescing() // stops the flusher after a failed dial too
	if s.pool == nil {
		return nil
	}
	if s.ownPool {
		return s.pool.Close()
	}
	s.pool.Reclaim(s.holder)
	s.cfg.SharedBuffers.Detach()
	return nil
}
