package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/sendbuf"
)

// DefaultDialTimeout bounds Dial when its context has no deadline, so that
// an unreachable peer is an error, not a hang.
const DefaultDialTimeout = 10 * time.Second

// SendConfig configures a buffered send endpoint.
type SendConfig struct {
	// Params sets the buffer size and count (defaults apply to zero fields)
	// and whether buffers come from SharedBuffers.
	Params netio.BufferedSendParams
	// SharedBuffers is the pool shared by endpoints of one domain. Required
	// when Params.UseSharedBuffers is set; it must belong to the same
	// domain.
	SharedBuffers *sendbuf.SendBufferManager
	// OnSendCompleted is called once per buffer handed to SendBuffer, with
	// its key (the buffer ID) and the outcome: OK when the provider
	// completed the send, Failed for an error completion, Canceled when the
	// endpoint closed first. The buffer is back in the pool when it runs.
	// It runs on the poller goroutine and must not block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnConnectionClosed is called once when the connection ends: with
	// netio.ErrClosed after Close, or an error matching
	// netio.ErrConnectionClosed when the peer shut down or the connection
	// broke. It runs on the poller goroutine and must not block. May be nil.
	OnConnectionClosed func(err error)
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

// Connection states.
const (
	stateConnecting uint32 = iota
	stateConnected
	stateClosed
)

// nextHolder gives every endpoint a process-wide identity in buffer pools,
// which may be shared by endpoints of different pollers.
var nextHolder atomic.Uint64

// SendStats counts what a send endpoint did.
type SendStats struct {
	Sent      uint64 // messages posted
	Bytes     uint64 // bytes posted
	Completed uint64 // sends completed OK
	Failed    uint64 // sends that completed with an error or were canceled
}

// SendEndpointBuffered sends messages from registered buffers (netio3's
// SendEndpointBuffered): GetBuffer, fill, SendBuffer; the completion returns
// the buffer and reports its ID as the key.
type SendEndpointBuffered struct {
	cfg       SendConfig
	mgr       *domain.Manager
	addr      string
	poller    *cq.Poller
	ownPoller bool
	owner     cq.Owner
	holder    uint64 // identity in the buffer pool, unique in the process
	pool      *sendbuf.Pool
	ownPool   bool
	log       zerolog.Logger

	// mu orders posts against teardown: SendBuffer holds it shared while it
	// posts, teardown holds it exclusively while it closes the endpoint.
	mu     sync.RWMutex
	ep     *fabric.Endpoint
	info   *fabric.Info // freed after ep is closed
	closed bool

	state     atomic.Uint32 // stateConnecting, stateConnected, stateClosed
	connected chan error    // Dial's outcome, written once by handleEvent
	ended     atomic.Bool   // no more GetBuffer
	closer    closer

	sent, bytes, completed, failed atomic.Uint64
}

// Dial connects to the listener at addr ("HOST:PORT") through mgr's domain
// and returns a buffered send endpoint. It honours ctx's deadline and
// cancellation, and applies DefaultDialTimeout when ctx has no deadline. A
// refused connection matches netio.ErrConnectionRefused.
func Dial(ctx context.Context, mgr *domain.Manager, addr string, cfg SendConfig) (*SendEndpointBuffered, error) {
	if err := cfg.validate(mgr); err != nil {
		return nil, err
	}
	host, port, err := splitAddr(addr, false)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDialTimeout)
		defer cancel()
	}
	s := &SendEndpointBuffered{cfg: cfg, mgr: mgr, addr: addr, log: cfg.Logger, connected: make(chan error, 1)}
	if err := s.open(host, port); err != nil {
		_ = s.release()
		return nil, connectError(addr, err)
	}
	select {
	case err = <-s.connected:
	case <-ctx.Done():
		select {
		case err = <-s.connected: // connected just as the context ended
		default:
			err = ctx.Err()
		}
	}
	if err != nil {
		s.state.Store(stateClosed)
		_ = s.release()
		return nil, connectError(addr, err)
	}
	s.log.Debug().Str("peer", addr).Msg("connected")
	return s, nil
}

// open sets up the poller, the buffers and the endpoint, and starts
// connecting. On error the caller releases what was set up.
func (s *SendEndpointBuffered) open(host, port string) error {
	var err error
	if s.poller, s.ownPoller, err = attachPoller(s.mgr, s.cfg.Poller, s.cfg.PollerConfig); err != nil {
		s.poller = nil
		return err
	}
	if s.owner, err = s.poller.Register(sendHandler{s}); err != nil {
		return err
	}
	s.holder = nextHolder.Add(1)
	if err = s.openPool(); err != nil {
		return err
	}
	// The info lives as long as the endpoint: the sockets provider keeps
	// pointers into it (the destination address) for its connection thread.
	if s.info, err = infoFor(s.mgr, host, port, false); err != nil {
		return err
	}
	if s.ep, err = openEndpoint(s.mgr, s.poller, s.info, s.owner); err != nil {
		return err
	}
	return s.ep.Connect(s.info)
}

func (s *SendEndpointBuffered) openPool() error {
	if s.cfg.Params.UseSharedBuffers {
		if err := s.cfg.SharedBuffers.Attach(); err != nil {
			return err
		}
		s.pool = s.cfg.SharedBuffers.Pool()
		return nil
	}
	pool, err := sendbuf.NewPool(s.mgr, s.cfg.Params.BufferSize, s.cfg.Params.BufferCount)
	if err != nil {
		return err
	}
	s.pool, s.ownPool = pool, true
	return nil
}

// GetBuffer leases a free registered buffer, or returns nil when none is
// free or the endpoint is closed. Fill buf.Bytes() and pass it to
// SendBuffer, or give it back with ReleaseBuffer.
func (s *SendEndpointBuffered) GetBuffer() *sendbuf.NetworkBuffer {
	if s.ended.Load() {
		return nil
	}
	return s.pool.Get(s.holder)
}

// SendBuffer sends the first size bytes of buf as one message and hands buf
// to the endpoint until its completion. It returns OK when posted;
// NoResources when the transmit queue is full (the caller keeps buf and may
// retry); InvalidArgument for a buffer not leased from this endpoint or a
// size outside 0..buf.Size(); Closed after Close or connection loss;
// Failed when the provider refuses the post. It does not allocate.
func (s *SendEndpointBuffered) SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	if !s.pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return netio.Closed
	}
	if !s.pool.MarkPosted(buf, s.holder) {
		return netio.InvalidArgument
	}
	errno := s.ep.Send(buf.Addr(), size, buf.Desc(), s.owner.Context(uint32(buf.ID())))
	if errno != 0 {
		s.pool.Unpost(buf)
		if errno.Temporary() {
			return netio.NoResources
		}
		return netio.Failed
	}
	s.sent.Add(1)
	s.bytes.Add(uint64(size))
	return netio.OK
}

// ReleaseBuffer gives back a leased buffer that was not sent and returns its
// key (the buffer ID). It reports InvalidArgument, changing nothing, for an
// unknown ID or a buffer not leased from this endpoint (already released,
// or in flight).
func (s *SendEndpointBuffered) ReleaseBuffer(id uint64) (uint64, netio.Status) {
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
func (s *SendEndpointBuffered) RemoteAddr() string { return s.addr }

// Stats returns the endpoint's counters.
func (s *SendEndpointBuffered) Stats() SendStats {
	return SendStats{Sent: s.sent.Load(), Bytes: s.bytes.Load(), Completed: s.completed.Load(), Failed: s.failed.Load()}
}

// sendHandler is the endpoint's cq.Handler, kept apart so that users cannot
// call the handler methods.
type sendHandler struct{ s *SendEndpointBuffered }

func (h sendHandler) HandleCompletion(key uint32, r cq.Result) { h.s.handleCompletion(key, r) }
func (h sendHandler) HandleEvent(ev fabric.Event)              { h.s.handleEvent(ev) }

// handleCompletion returns the buffer and reports its key. It runs on the
// poller goroutine.
func (s *SendEndpointBuffered) handleCompletion(key uint32, r cq.Result) {
	if !s.pool.Complete(uint64(key), s.holder) {
		return // already reported by teardown
	}
	if r.Status == netio.OK {
		s.completed.Add(1)
	} else {
		s.failed.Add(1)
		s.log.Warn().Uint32("key", key).Stringer("status", r.Status).Err(r.Errno).Msg("send failed")
	}
	if cb := s.cfg.OnSendCompleted; cb != nil {
		cb(uint64(key), r.Status)
	}
}

// handleEvent completes Dial or ends the connection. It runs on the poller
// goroutine.
func (s *SendEndpointBuffered) handleEvent(ev fabric.Event) {
	ev.Info.Free()
	switch s.state.Load() {
	case stateConnecting:
		var err error
		if ev.Kind == fabric.EventConnected {
			s.state.Store(stateConnected)
		} else {
			err = closeReason(ev) // refused or failed while connecting
		}
		select {
		case s.connected <- err:
		default: // Dial gave up already
		}
	case stateConnected:
		s.teardown(closeReason(ev))
	}
}

// teardown ends the connection once: it closes the endpoint (the provider
// lets go of every buffer), reports every pending key as Canceled, then
// calls OnConnectionClosed. It runs on the poller goroutine.
func (s *SendEndpointBuffered) teardown(reason error) {
	if s.state.Swap(stateClosed) == stateClosed {
		return
	}
	s.ended.Store(true)
	s.closeEndpoint()
	s.poller.Unregister(s.owner)
	// Return every buffer first, then report: a callback that calls Close
	// finds the pool whole.
	pending := s.pool.Posted(nil, s.holder)
	canceled := pending[:0]
	for _, id := range pending {
		if s.pool.Complete(id, s.holder) {
			canceled = append(canceled, id)
		}
	}
	s.failed.Add(uint64(len(canceled)))
	if cb := s.cfg.OnSendCompleted; cb != nil {
		for _, id := range canceled {
			cb(id, netio.Canceled)
		}
	}
	s.log.Debug().Str("peer", s.addr).Int("canceled", len(canceled)).Err(reason).Msg("connection closed")
	if cb := s.cfg.OnConnectionClosed; cb != nil {
		cb(reason)
	}
}

// closeEndpoint closes the endpoint, once, after posts in progress have
// finished; the peer sees the connection closed. It runs on the poller
// goroutine, so that no queue read races with the close. There is no
// fi_shutdown first: shutdown followed at once by close corrupts the heap
// of the sockets provider (libfabric 1.17), and close alone tells the peer.
func (s *SendEndpointBuffered) closeEndpoint() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if err := s.ep.Close(); err != nil {
		s.log.Error().Err(err).Msg("closing endpoint")
	}
	s.info.Free()
}

// Close ends the connection: the peer sees it closed, every pending key is
// reported with Canceled, every buffer goes back, and the endpoint's own
// poller stops. Buffers the caller leased and did not send are taken back
// too: SendBuffer refuses them, and their memory stays mapped while the
// caller holds them, so a late write is harmless. It is idempotent and may
// be called from a callback.
func (s *SendEndpointBuffered) Close() error {
	return s.closer.close(s.poller, func() error {
		s.poller.Do(func() { s.teardown(netio.ErrClosed) })
		return s.release()
	})
}

// release frees what open set up, in reverse order. Dial calls it after a
// failed connection attempt, Close after teardown.
func (s *SendEndpointBuffered) release() error {
	s.ended.Store(true)
	if s.poller == nil {
		return nil
	}
	s.poller.Unregister(s.owner)
	if s.ep != nil {
		s.poller.Do(s.closeEndpoint)
	} else {
		s.info.Free()
	}
	var errs []error
	if s.pool != nil {
		if s.ownPool {
			errs = append(errs, s.pool.Close())
		} else {
			s.pool.Reclaim(s.holder)
			s.cfg.SharedBuffers.Detach()
		}
	}
	if s.ownPoller {
		errs = append(errs, s.poller.Close())
	}
	return errors.Join(errs...)
}
