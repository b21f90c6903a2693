package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/backoff"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/stats"
)

// Defaults and limits for ReconnectConfig.
const (
	DefaultReconnectInitialBackoff = 10 * time.Millisecond
	DefaultReconnectMaxBackoff     = 2 * time.Second
	// MaxReconnectBacklogBytes bounds Backlog × Send.Params.BufferSize:
	// DialReconnecting allocates the whole backlog up front, on the Go
	// heap, so an unbounded one could exhaust the process's memory.
	MaxReconnectBacklogBytes = 1 << 30
)

// backlogRetry is how long a backlog whose post the provider refused with
// a buffer free first waits before it is posted again, if no completion
// drains it first: the send core's retry of a stalled hand-off, for the
// same reason (see retryDrain). Each retry of the timer's own that is
// refused again doubles the wait, up to backlogRetryMax, and a post taken
// brings it back to backlogRetry: a peer stalled for seconds then costs a
// retry every backlogRetryMax instead of every millisecond (a timer, a
// lock and a refused post each). Refusals met by Send or a completion
// neither double the wait nor push a pending retry out, so a burst of
// Sends into a stall that clears at once still retries after about
// backlogRetry.
const backlogRetry = sendcore.HandOffRetry

// backlogRetryMax caps the wait between retries of a refused backlog: a
// stalled peer that recovers waits at most this long for the backlog to
// move on by itself (a completion or a Send drains it at once).
const backlogRetryMax = 64 * time.Millisecond

// ReconnectConfig configures a ReconnectingSender.
type ReconnectConfig struct {
	// Send configures each connection. Its OnSendCompleted and
	// OnConnectionClosed are replaced by the sender's own; use the fields
	// below instead. Send.Buffers must not be sendbuf.Shared: every
	// connection has its own buffers. Send.Coalesce and Send.Replies must
	// be nil: the sender owns each connection's buffers and keys.
	Send SendConfig
	// Backlog is how many messages may wait while the sender is
	// disconnected (or while every send buffer is in flight after a
	// reconnect). 0 selects Send.Params.BufferCount, or as many as fit in
	// MaxReconnectBacklogBytes if fewer. It is allocated up front (Backlog
	// × Send.Params.BufferSize bytes), so it may be at most
	// netio.MaxBufferCount and take at most MaxReconnectBacklogBytes.
	Backlog int
	// InitialBackoff is the wait after the first failed dial; each further
	// failure doubles it up to MaxBackoff. A successful connection resets it.
	// 0 selects DefaultReconnectInitialBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between dials. 0 selects
	// DefaultReconnectMaxBackoff.
	MaxBackoff time.Duration
	// DialTimeout bounds one dial. 0 selects DefaultDialTimeout.
	DialTimeout time.Duration
	// OnSendCompleted is called exactly once for every key Send returned OK
	// for; the key is that one, the message's, not a buffer ID. Status:
	// OK when the provider completed the send, Failed when the
	// connection broke while the message was in flight (it may or may not
	// have arrived; it is not sent again; a message of HandOffSize bytes or
	// more, or one behind it, is in flight once queued for the poller, and
	// a refusal of that post counts the same), Canceled when Close found it
	// still waiting in the backlog (or the sender stopped because its
	// domain was closed). It runs on a poller goroutine or, for Canceled,
	// on the goroutine calling Close or the sender's dial goroutine, and
	// must not block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnConnectionChange is called after each connection is established
	// (err nil) and after each one ends (err says why), and once with
	// connected false and an error matching netio.ErrClosed when the
	// sender stops by itself because a dial found the domain (or the
	// shared Send.Poller) closed. It runs on the sender's dial goroutine
	// and must not block for long. May be nil.
	OnConnectionChange func(connected bool, err error)
}

func (c *ReconnectConfig) validate(mgr *domain.Manager) error {
	if c.Send.Buffers.SharedManager() != nil {
		return fmt.Errorf("%w: endpoint: a reconnecting sender cannot use shared buffers", netio.ErrInvalidArgument)
	}
	if c.Send.Coalesce != nil {
		// The sender posts whole buffers itself; a coalescing endpoint
		// hands out none.
		return fmt.Errorf("%w: endpoint: a reconnecting sender cannot coalesce", netio.ErrInvalidArgument)
	}
	if c.Send.Replies != nil {
		// OnReply would hand out the connection's own endpoint, whose
		// buffers and keys the sender owns.
		return fmt.Errorf("%w: endpoint: a reconnecting sender takes no replies", netio.ErrInvalidArgument)
	}
	if err := c.Send.validate(mgr); err != nil {
		return err
	}
	if c.Backlog < 0 || c.InitialBackoff < 0 || c.MaxBackoff < 0 || c.DialTimeout < 0 {
		return fmt.Errorf("%w: endpoint: negative backlog, backoff or dial timeout", netio.ErrInvalidArgument)
	}
	if c.Backlog == 0 {
		// Send.validate applied the defaults: BufferSize is at least 1 and
		// at most netio.MaxBufferSize, so at least one slot fits.
		c.Backlog = min(c.Send.Params.BufferCount, MaxReconnectBacklogBytes/c.Send.Params.BufferSize)
	}
	if c.Backlog > netio.MaxBufferCount {
		return fmt.Errorf("%w: endpoint: backlog of %d messages above %d", netio.ErrInvalidArgument, c.Backlog, netio.MaxBufferCount)
	}
	if int64(c.Backlog)*int64(c.Send.Params.BufferSize) > MaxReconnectBacklogBytes {
		return fmt.Errorf("%w: endpoint: backlog of %d messages of %d bytes above %d bytes",
			netio.ErrInvalidArgument, c.Backlog, c.Send.Params.BufferSize, MaxReconnectBacklogBytes)
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = DefaultReconnectInitialBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultReconnectMaxBackoff
	}
	if c.MaxBackoff < c.InitialBackoff {
		return fmt.Errorf("%w: endpoint: MaxBackoff %v below InitialBackoff %v", netio.ErrInvalidArgument, c.MaxBackoff, c.InitialBackoff)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	return nil
}

// ReconnectStats counts what a ReconnectingSender did. HandedOver =
// Completed + Failed + Canceled + Backlog + InFlight at every instant the
// sender is idle; after Close, Backlog and InFlight are 0.
type ReconnectStats struct {
	HandedOver  uint64 // messages Send accepted
	Completed   uint64 // reported OK
	Failed      uint64 // reported Failed (in flight when a connection broke)
	Canceled    uint64 // reported Canceled (in the backlog at Close)
	Backlog     int    // waiting for a connection or a buffer
	Connections uint64 // connections established
	DialErrors  uint64 // dials that failed
}

// backlogSlot is one message waiting for a connection.
type backlogSlot struct {
	key  uint64
	data []byte // a preallocated BufferSize array, resliced to the message
}

// ReconnectingSender sends messages over a connection that it re-dials
// whenever it breaks, with exponential backoff capped by MaxBackoff. Every
// message Send accepts gets a key and is reported exactly once through
// OnSendCompleted: sent, failed, or canceled; none is dropped without a
// report. Messages accepted while disconnected wait in a bounded backlog and
// go out, in order, after the next connection is established. A message in
// flight when a connection breaks is reported Failed and not sent again, so
// the peer never sees a message twice (with SendConfig.Inject, one the
// provider had taken by fi_inject was reported OK already, and may be
// lost: see SendConfig.Inject). A post of the backlog that the provider
// refuses with a buffer free (with Inject, once it holds
// SendConfig.MaxInjectsHeld sends) is tried again after a millisecond, the
// wait doubling with each of those retries refused in a row up to 64 ms and
// back to a millisecond once a post is taken, so the backlog drains without
// a further Send. When a dial finds the domain closed
// the sender stops by itself, as if closed: the backlog is reported
// Canceled and Send returns Closed.
type ReconnectingSender struct {
	mgr  *domain.Manager
	addr string
	cfg  ReconnectConfig

	mu      sync.Mutex
	ep      *SendEndpointBuffered // nil while disconnected
	backlog []backlogSlot         // ring buffer
	head, n int                   // first waiting slot, waiting count
	nextKey uint64
	closed  bool
	retry   *time.Timer // drains the backlog again after a refusal (retryDrain)
	// retryWait is the wait before the next retry after a refusal:
	// backlogRetry, doubled by each of the timer's retries refused in a
	// row, up to backlogRetryMax.
	retryWait    backoff.Doubling
	retryPending bool          // retry is armed; under mu
	retries      atomic.Uint64 // retryDrain runs, for tests of the backoff

	handedOver, completed, failed, canceled atomic.Uint64
	connections, dialErrors                 atomic.Uint64
	bytes                                   atomic.Uint64 // of the messages handed over
	entry                                   *stats.Entry  // the sender in its manager's stats.Registry

	ctx    context.Context // canceled by Close: ends dials and backoff waits
	cancel context.CancelFunc
	done   chan struct{} // closed when the dial goroutine has returned
}

// DialReconnecting starts a ReconnectingSender to addr ("HOST:PORT"). It
// returns at once: the first connection is dialled in the background, and
// messages sent before it is up wait in the backlog. Bad configuration and
// an address that does not parse are reported here (netio.ErrInvalidArgument,
// netio.ErrBadAddress), and so is a closed domain (netio.ErrClosed), in
// which no dial could succeed.
func DialReconnecting(mgr *domain.Manager, addr string, cfg ReconnectConfig) (*ReconnectingSender, error) {
	if err := cfg.validate(mgr); err != nil {
		return nil, err
	}
	if _, _, err := splitAddr(addr, false); err != nil {
		return nil, err
	}
	if mgr.Closed() {
		return nil, fmt.Errorf("endpoint: reconnecting sender: %w", netio.ErrClosed)
	}
	r := &ReconnectingSender{mgr: mgr, addr: addr, cfg: cfg, done: make(chan struct{})}
	r.backlog = make([]backlogSlot, cfg.Backlog)
	for i := range r.backlog {
		r.backlog[i].data = make([]byte, cfg.Send.Params.BufferSize)
	}
	r.retry = time.AfterFunc(time.Hour, r.retryDrain)
	r.retry.Stop()
	r.retryWait = backoff.New(backlogRetry, backlogRetryMax)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.entry = mgr.Registry().AddEndpoint(stats.Endpoint{Kind: stats.KindReconnecting, Peer: addr}, r.fillStats)
	go r.run()
	return r, nil
}

// Send hands one message to the sender, which copies it, and returns its
// key (never 0). It returns NoResources when the backlog is full, or when
// it is empty and the connection cannot take the message now (every
// buffer in flight, or the provider refused it: with Send.Inject at
// Send.MaxInjectsHeld); the caller keeps its data and may retry after a
// pause. It returns InvalidArgument for a message
// larger than Send.Params.BufferSize, Closed after Close. It does not
// block and does not allocate.
func (r *ReconnectingSender) Send(data []byte) (uint64, netio.Status) {
	if len(data) > r.cfg.Send.Params.BufferSize {
		return 0, netio.InvalidArgument
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, netio.Closed
	}
	key := r.nextKey + 1
	if r.n == 0 && r.ep != nil {
		switch st, _ := r.post(key, data); st {
		case netio.OK:
			r.accept(len(data))
			return key, netio.OK
		case netio.NoResources:
			return 0, netio.NoResources
		}
		// Closed or Failed: the connection is going; the backlog keeps it.
	}
	if r.n == len(r.backlog) {
		return 0, netio.NoResources
	}
	slot := &r.backlog[(r.head+r.n)%len(r.backlog)]
	slot.key, slot.data = key, slot.data[:copy(slot.data[:cap(slot.data)], data)]
	r.n++
	r.accept(len(data))
	if r.ep != nil {
		r.drain(false)
	}
	return key, netio.OK
}

// accept counts a message of n bytes Send took. Callers hold mu.
func (r *ReconnectingSender) accept(n int) {
	r.nextKey++
	r.handedOver.Add(1)
	r.bytes.Add(uint64(n))
}

// fillStats is the sender's record in its manager's stats.Registry: its
// connections are not registered apart, so each message counts once.
// Messages handed over count as sent; pending are those not yet reported
// (in the backlog or in flight).
func (r *ReconnectingSender) fillStats(e *stats.Endpoint) {
	completed, failed, canceled := r.completed.Load(), r.failed.Load(), r.canceled.Load()
	e.MessagesSent, e.BytesSent = r.handedOver.Load(), r.bytes.Load()
	e.SendsCompleted, e.SendsFailed, e.SendsCanceled = completed, failed, canceled
	if done := completed + failed + canceled; e.MessagesSent > done {
		e.PendingSends = int(e.MessagesSent - done)
	}
	e.Connections, e.DialErrors = r.connections.Load(), r.dialErrors.Load()
	if e.Connections > 1 {
		e.Reconnects = e.Connections - 1
	}
}

// post sends data on the current connection as message key. NoResources
// means no buffer or no room in the provider right now; refused says it
// was the provider (or SendConfig.MaxInjectsHeld) with a buffer free,
// which no completion of this sender's need end. Callers hold mu.
func (r *ReconnectingSender) post(key uint64, data []byte) (st netio.Status, refused bool) {
	buf := r.ep.GetBuffer()
	if buf == nil {
		if r.ep.c.Ended() {
			return netio.Closed, false
		}
		return netio.NoResources, false
	}
	n := copy(buf.Bytes(), data)
	// The endpoint reports the message's key, not the buffer's ID: it
	// keeps the key with the buffer in flight (sendKeyed).
	if st = r.ep.sendKeyed(buf, n, key); st != netio.OK {
		r.ep.ReleaseBuffer(buf.ID())
		return st, st == netio.NoResources
	}
	return netio.OK, false
}

// drain posts waiting messages, oldest first, while buffers are free. A
// post the provider refused with a buffer free arms the retry timer unless
// it is armed already; fromTimer says the timer's own retry runs it, whose
// refusal doubles the wait first. A post taken shortens the wait again.
// Callers hold mu.
func (r *ReconnectingSender) drain(fromTimer bool) {
	for r.n > 0 && r.ep != nil {
		slot := &r.backlog[r.head]
		if st, refused := r.post(slot.key, slot.data); st != netio.OK {
			if refused {
				r.armRetry(fromTimer)
			}
			return
		}
		r.retryWait.Reset() // progress: a new refusal retries soon
		r.head = (r.head + 1) % len(r.backlog)
		r.n--
	}
}

// armRetry arms the retry timer after a refused post, unless a retry is
// pending: pushing it out would let a stream of refused Sends delay it
// for ever. A refusal of the timer's own retry (again) doubles the wait.
// Callers hold mu.
func (r *ReconnectingSender) armRetry(again bool) {
	if again {
		r.retryWait.Refused()
	}
	if !r.retryPending {
		r.retryPending = true
		r.retry.Reset(r.retryWait.Wait())
	}
}

// retryDrain drains the backlog again after a post the provider refused
// with a buffer free. A completion drains it too, but with
// SendConfig.Inject the bound MaxInjectsHeld refuses until the provider has
// sent enough, which no completion announces (the injects were reported
// OK as they were taken), so without it the backlog of a sender that
// sends nothing more would wait until Close canceled it. It runs on the
// timer's goroutine.
func (r *ReconnectingSender) retryDrain() {
	r.retries.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retryPending = false
	if !r.closed {
		r.drain(true)
	}
}

// onCompleted reports a message's completion (the endpoint gives its key)
// and refills the freed buffer from the backlog. It runs on the poller.
func (r *ReconnectingSender) onCompleted(key uint64, st netio.Status) {
	if st == netio.OK {
		r.mu.Lock()
		r.drain(false)
		r.mu.Unlock()
	}
	if st == netio.OK {
		r.completed.Add(1)
	} else {
		st = netio.Failed
		r.failed.Add(1)
	}
	if cb := r.cfg.OnSendCompleted; cb != nil {
		cb(key, st)
	}
}

// run dials, waits for the connection to end, and dials again, until Close.
func (r *ReconnectingSender) run() {
	defer close(r.done)
	wait := backoff.New(r.cfg.InitialBackoff, r.cfg.MaxBackoff)
	for r.ctx.Err() == nil {
		if r.mgr.Closed() {
			// Closed while we waited: do not dial into it at all (its
			// fabric objects are gone).
			r.stopClosed(fmt.Errorf("endpoint: reconnecting sender: domain %w", netio.ErrClosed))
			return
		}
		ended := make(chan error, 1)
		ep, err := r.dial(ended)
		if err != nil {
			r.dialErrors.Add(1)
			if errors.Is(err, netio.ErrClosed) && r.ctx.Err() == nil {
				// The domain (or the shared poller) was closed: every
				// later dial would fail the same way.
				r.stopClosed(err)
				return
			}
			r.cfg.Send.Logger.Debug().Err(err).Str("addr", r.addr).Dur("backoff", wait.Wait()).Msg("dial failed")
			r.sleep(wait.Wait())
			wait.Refused()
			continue
		}
		wait.Reset()
		r.connections.Add(1)
		r.attach(ep)
		r.notify(true, nil)
		select {
		case err = <-ended:
		case <-r.ctx.Done():
			err = netio.ErrClosed
		}
		r.detach()
		_ = ep.Close() // reports what was in flight (Failed) before it returns
		r.notify(false, err)
	}
}

// stopClosed stops the sender for good when it can no longer dial (its
// domain or shared poller is closed), as Close does, instead of retrying
// forever: the backlog is reported Canceled and Send refuses. It runs on
// the dial goroutine, which returns after it.
func (r *ReconnectingSender) stopClosed(err error) {
	r.cfg.Send.Logger.Debug().Err(err).Str("addr", r.addr).Msg("cannot dial any more: sender stops")
	r.stop()
	r.notify(false, err)
}

// dial makes one connection whose end is signalled on ended.
func (r *ReconnectingSender) dial(ended chan<- error) (*SendEndpointBuffered, error) {
	cfg := r.cfg.Send
	cfg.OnSendCompleted = r.onCompleted
	cfg.OnConnectionClosed = func(err error) {
		select {
		case ended <- err:
		default:
		}
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialTimeout)
	defer cancel()
	return dialKind(ctx, r.mgr, r.addr, cfg, "") // counted as the sender's own

}

// attach makes ep the current connection and sends the backlog on it.
func (r *ReconnectingSender) attach(ep *SendEndpointBuffered) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ep = ep
	r.drain(false)
}

// detach stops Send from posting on the current connection.
func (r *ReconnectingSender) detach() {
	r.mu.Lock()
	r.ep = nil
	r.mu.Unlock()
}

// sleep waits d or until Close.
func (r *ReconnectingSender) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
	}
}

func (r *ReconnectingSender) notify(connected bool, err error) {
	if cb := r.cfg.OnConnectionChange; cb != nil {
		cb(connected, err)
	}
}

// Connected reports whether a connection is up now.
func (r *ReconnectingSender) Connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ep != nil
}

// Stats returns the sender's counters.
func (r *ReconnectingSender) Stats() ReconnectStats {
	r.mu.Lock()
	backlog := r.n
	r.mu.Unlock()
	return ReconnectStats{
		HandedOver: r.handedOver.Load(), Completed: r.completed.Load(),
		Failed: r.failed.Load(), Canceled: r.canceled.Load(), Backlog: backlog,
		Connections: r.connections.Load(), DialErrors: r.dialErrors.Load(),
	}
}

// Close stops dialling, closes the connection (messages in flight are
// reported Failed) and reports every message still in the backlog as
// Canceled. It is idempotent; it must not be called from a callback.
func (r *ReconnectingSender) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	<-r.done
	r.stop()
	r.entry.Remove(nil)
	return nil
}

// stop refuses further Sends and reports every message in the backlog
// Canceled. Each key is taken from the backlog under mu, so when the dial
// goroutine and Close both stop the sender, none is reported twice.
func (r *ReconnectingSender) stop() {
	r.mu.Lock()
	r.closed = true
	r.retry.Stop()
	keys := make([]uint64, 0, r.n)
	for ; r.n > 0; r.n-- {
		keys = append(keys, r.backlog[r.head].key)
		r.head = (r.head + 1) % len(r.backlog)
	}
	r.mu.Unlock()
	r.canceled.Add(uint64(len(keys)))
	if cb := r.cfg.OnSendCompleted; cb != nil {
		for _, k := range keys {
			cb(k, netio.Canceled)
		}
	}
}
