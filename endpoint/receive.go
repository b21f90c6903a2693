package endpoint

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/stats"
)

// ReceiveStats counts what a receive endpoint did.
type ReceiveStats struct {
	Messages uint64 // messages received: passed to OnData, or decoded for OnMessage
	Bytes    uint64 // bytes of those messages
	Errors   uint64 // receives that completed with an error

	CoalescedMessages uint64 // messages decoded from them and passed to OnMessage
	MalformedBuffers  uint64 // received messages that broke the coalesced format
}

// ReceiveEndpoint is one accepted connection. It keeps Params.BufferCount
// buffers of Params.BufferSize bytes posted: from one region registered
// for receiving only, or leased from ListenConfig.Buffers.
type ReceiveEndpoint struct {
	l     *Listener
	id    uint64
	owner poll.Owner
	ep    *fabric.Endpoint
	in    inbox        // the posted receive buffers
	out   *replySender // the send half (ListenConfig.Replies), or nil
	// deliverFn is deliver, bound once so that a receive does not allocate.
	deliverFn func(data []byte)
	local     atomic.Pointer[string] // set once connected, before OnConnectionEstablished
	info      *fabric.Info
	rmaOps                   // PullAsync, PushAsync, Pull, Push; completion keys have rmaKeyFlag set
	post      sendcore.Guard // the endpoint for RMA posts, against its close

	// Poller goroutine only: delivering what is left after the peer's
	// shutdown.
	drain drainer
	// Poller goroutine only: the receives posted and not yet completed,
	// and whether the close is reading out what the provider placed
	// before it (readOut).
	posted     int
	readingOut bool

	state                   atomic.Uint32
	messages, bytes, errors atomic.Uint64

	dec                coalesce.Decoder // poller goroutine only: for OnMessage
	decoded, malformed atomic.Uint64

	idle      *time.Timer // IdleTimeout's check; set once connected
	truncated atomic.Bool // a message larger than the buffers arrived

	peer  string       // the peer's address, "" when unknown
	entry *stats.Entry // the connection in its manager's stats.Registry
}

// open registers or leases the buffers, opens the endpoint for the
// request, posts every buffer and accepts. It runs on the poller goroutine.
func (r *ReceiveEndpoint) open(info *fabric.Info) error {
	l := r.l
	p := l.cfg.Params
	var err error
	r.deliverFn = r.deliver
	if r.owner, err = l.poller.Register(receiveHandler{r}); err != nil {
		return err
	}
	if err = r.in.open(l.mgr, l.cfg.Buffers, p.BufferSize, p.BufferCount, r.owner.Context, l.log); err != nil {
		return err
	}
	if err = r.openReplies(); err != nil {
		return err
	}
	if r.ep, err = openEndpoint(l.mgr, l.poller, info, r.owner); err != nil {
		return err
	}
	r.post.Set(r.ep)
	r.rmaOps.init(l.mgr, l.poller, r.owner, &r.post, l.cfg.RMA, l.log)
	if err = r.postAll(); err != nil {
		return err
	}
	r.posted = p.BufferCount
	return r.ep.Accept()
}

// postAll posts every buffer in one call.
func (r *ReceiveEndpoint) postAll() error {
	if err := r.in.postAll(r.ep); err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	return nil
}

// ID returns the connection's number within its listener, from 1.
func (r *ReceiveEndpoint) ID() uint64 { return r.id }

// LocalAddr returns the connection's local address, or "" before the
// connection is established.
func (r *ReceiveEndpoint) LocalAddr() string {
	if p := r.local.Load(); p != nil {
		return *p
	}
	return ""
}

// RemoteAddr returns the peer's address ("ip:port"), or "" when the
// provider did not say.
func (r *ReceiveEndpoint) RemoteAddr() string { return r.peer }

// fillStats is the connection's record in its manager's stats.Registry.
func (r *ReceiveEndpoint) fillStats(e *stats.Endpoint) {
	s := r.Stats()
	e.MessagesReceived, e.BytesReceived, e.ReceiveErrors = s.Messages, s.Bytes, s.Errors
	e.DecodedMessages, e.MalformedBuffers = s.CoalescedMessages, s.MalformedBuffers
	e.Buffers = r.l.cfg.Params.BufferCount // all posted while it is open
	if r.out != nil {
		r.out.counters.Fill(e)
	}
}

// Stats returns the endpoint's counters.
func (r *ReceiveEndpoint) Stats() ReceiveStats {
	return ReceiveStats{Messages: r.messages.Load(), Bytes: r.bytes.Load(), Errors: r.errors.Load(),
		CoalescedMessages: r.decoded.Load(), MalformedBuffers: r.malformed.Load()}
}

// receiveHandler is the endpoint's poll.Handler, kept apart so that users
// cannot call the handler methods.
type receiveHandler struct{ r *ReceiveEndpoint }

func (h receiveHandler) HandleCompletion(key uint32, res poll.Result) { h.r.handleCompletion(key, res) }
func (h receiveHandler) HandleEvent(ev fabric.Event)                  { h.r.handleEvent(ev) }

// handleCompletion passes the message to OnData (or decodes it for
// OnMessage) and posts the buffer again.
// It runs on the poller goroutine.
func (r *ReceiveEndpoint) handleCompletion(key uint32, res poll.Result) {
	if key == drainPeekKey {
		r.drain.peeked(res)
		return
	}
	if isRMAKey(key) {
		r.rmaOps.handleCompletion(key, res)
		return
	}
	if isReverseKey(key) {
		r.sent(key&^reverseKeyFlag, res)
		return
	}
	if res.Status != netio.OK || res.Flags&fabric.FlagRecv != 0 {
		r.posted-- // a receive's completion: placed, flushed or failed
	}
	if r.state.Load() == stateClosed && !r.readingOut || res.Flags&fabric.FlagRecv == 0 && res.Status == netio.OK {
		return
	}
	if res.Status != netio.OK {
		r.receiveFailed(key, res)
		return
	}
	r.messages.Add(1)
	r.bytes.Add(uint64(res.Len))
	r.drain.received()
	if r.in.deliver(key, res.Len, r.deliverFn) { // false: OnData closed the endpoint
		r.repost(key)
	}
}

func (r *ReceiveEndpoint) receiveFailed(key uint32, res poll.Result) {
	if res.Status == netio.Canceled {
		return // the endpoint is closing; its buffers are going away
	}
	r.errors.Add(1)
	err := fmt.Errorf("%w: receive of %d bytes: %w", netio.ErrFailed, res.Len, res.Errno)
	if errors.Is(res.Errno, fabric.ETRUNC) {
		r.truncated.Store(true)
		err = fmt.Errorf("%w: a message larger than the %d-byte receive buffers: %w",
			netio.ErrFailed, r.l.cfg.Params.BufferSize, res.Errno)
	}
	r.l.log.Warn().Uint64("conn", r.id).Err(err).Msg("receive failed")
	if cb := r.l.cfg.OnReceiveError; cb != nil {
		cb(r, err)
	}
	r.repost(key)
}

// repost posts buffer key again, unless a callback closed the endpoint.
func (r *ReceiveEndpoint) repost(key uint32) {
	if r.state.Load() == stateClosed {
		return
	}
	if errno := r.in.repost(r.ep, key); errno != 0 {
		r.errors.Add(1)
		r.l.log.Error().Uint64("conn", r.id).Err(errno).Msg("reposting receive buffer")
		return
	}
	r.posted++
}

// handleEvent runs on the poller goroutine.
func (r *ReceiveEndpoint) handleEvent(ev fabric.Event) {
	ev.Info.Free()
	switch {
	case ev.Kind == fabric.EventConnected && r.state.CompareAndSwap(stateConnecting, stateConnected):
		local, _ := r.ep.Addr() // final once connected
		r.local.Store(&local)
		if t := r.l.cfg.IdleTimeout; t > 0 {
			r.watchIdle(t)
		}
		r.watchReplies()
		r.l.log.Debug().Uint64("conn", r.id).Str("peer", r.peer).Msg("connection established")
		if cb := r.l.cfg.OnConnectionEstablished; cb != nil {
			cb(r)
		}
	case ev.Kind == fabric.EventShutdown && r.state.Load() == stateConnected:
		r.drain.begin(r.l.poller, r.closed, r.endDrained, drainPeek(r.l.mgr.Provider(), r.peek))
	case ev.Kind != fabric.EventConnected:
		r.teardown(r.peerClosed(closeReason(ev)))
	}
}

// peerClosed is why the peer ended the connection: a provider may drop a
// connection whose peer sent a message larger than the posted buffers
// (quirks.Quirks.TruncationDrops), and the truncation is the real cause,
// so it is named.
func (r *ReceiveEndpoint) peerClosed(reason error) error {
	if r.truncated.Load() {
		return fmt.Errorf("%w (after a message larger than the %d-byte receive buffers: %w)",
			reason, r.l.cfg.Params.BufferSize, fabric.ETRUNC)
	}
	return reason
}

// closed reports whether the connection has ended.
func (r *ReceiveEndpoint) closed() bool { return r.state.Load() == stateClosed }

// peek posts the drain's peek (drainer.confirm). It runs on the poller
// goroutine, which alone closes the endpoint.
func (r *ReceiveEndpoint) peek() fabric.Errno { return r.ep.Peek(r.owner.Context(drainPeekKey)) }

// endDrained ends the connection once the drain after the peer's
// shutdown is over (see drainer).
func (r *ReceiveEndpoint) endDrained() { r.teardown(r.peerClosed(netio.ErrConnectionClosed)) }

// teardown ends the connection once: it closes the endpoint (the peer sees
// it closed, and the provider places nothing more), delivers what the
// provider placed before the close (readOut), then frees the buffers and
// gives an established connection its OnConnectionClosed (end). Called
// from a completion callback of the listener's poller (OnData closing the
// connection), where the completion queue cannot be read, it leaves the
// read-out and the rest to the poller's run queue, after the read being
// dispatched: the rest of that read is delivered meanwhile, as the
// read-out would deliver it. It runs on the poller goroutine.
func (r *ReceiveEndpoint) teardown(reason error) {
	prev := r.state.Swap(stateClosed)
	if prev == stateClosed {
		return
	}
	r.drain.stop()
	if r.idle != nil {
		r.idle.Stop()
	}
	r.closeEndpoint(reason)
	if p := r.l.poller; p.Dispatching() && p.Go(func() { r.end(reason, prev) }) {
		return
	}
	r.end(reason, prev)
}

// end finishes what teardown began, once the queue can be read.
func (r *ReceiveEndpoint) end(reason error, prev uint32) {
	r.readOut()
	r.free()
	r.l.retire(r)          // after the read-out: the messages it delivered are counted
	r.entry.Remove(reason) // after closeEndpoint: the sends it canceled are counted
	r.l.log.Debug().Uint64("conn", r.id).Str("peer", r.peer).Err(reason).Msg("connection closed")
	if cb := r.l.cfg.OnConnectionClosed; cb != nil && prev == stateConnected {
		cb(r, reason)
	}
}

// release ends a connection that was never accepted: it closes the
// endpoint, reads out the receives the close flushed (none was placed:
// the peer could not send yet), so that they are not counted as dropped,
// and frees what open set up.
func (r *ReceiveEndpoint) release(reason error) {
	r.closeEndpoint(reason)
	r.readOut()
	r.free()
}

// closeEndpoint closes the endpoint, which tells the peer, and ends its
// RMA transfers in flight (canceled for reason) and its replies in flight
// (Canceled): their flushed completions, read out later, find them
// reported. From then on its receive completions are delivered without
// reposting (readingOut).
func (r *ReceiveEndpoint) closeEndpoint(reason error) {
	r.readingOut = true
	r.post.Close(func() { // no RMA post may race with the close
		if err := r.ep.Close(); err != nil {
			r.l.log.Error().Err(err).Msg("closing endpoint")
		}
	})
	r.rmaOps.cancelPending(reason)
	r.cancelSends()
}

// free forgets the endpoint's completions and frees the receive buffers
// (deregistered, or handed back to the pool): after closeEndpoint and
// readOut, so the provider has let go of them first.
func (r *ReceiveEndpoint) free() {
	r.readingOut = false
	r.l.poller.Unregister(r.owner)
	r.info.Free()
	if err := r.in.free(); err != nil {
		r.l.log.Error().Err(err).Msg("freeing receive buffers")
	}
}

// readOut delivers the messages the provider placed in the connection's
// buffers before its endpoint was closed and that still wait in the
// completion queue, behind other connections' completions (the poll loop
// runs queued work, such as this close, after at most 16 batches or error
// completions). With DeliveryComplete the provider acknowledged each at
// placement, so its sender has it reported OK: dropping it lost a message
// reported delivered. It reads until every posted receive has completed
// (tcp flushes the rest with FI_ECANCELED at the close) or the queue is
// empty (poll.Poller.ReadOut). OnData runs for them before
// OnConnectionClosed; the buffers are not posted again. It runs on the
// poller goroutine, after closeEndpoint, outside a completion callback
// (see teardown). It cannot read once the listener's poller has stopped
// or while it dispatches a read (a teardown run inline there because the
// poller refused Go, in its last run): what still waits is then discarded,
// and a Warn says so.
func (r *ReceiveEndpoint) readOut() {
	if r.posted <= 0 {
		return
	}
	if !r.l.poller.ReadOut(func() bool { return r.posted <= 0 }) {
		r.l.log.Warn().Uint64("conn", r.id).Int("receives", r.posted).Msg("closed without reading out the completion queue")
	}
}

// Close closes this connection; the peer sees it closed, the messages the
// provider had already placed in its buffers are passed to OnData (with
// SendConfig.DeliveryComplete their sender has them reported OK), every
// reply still in flight (ListenConfig.Replies) is reported Canceled to
// ListenReplies.OnSendCompleted, and then OnConnectionClosed runs with
// netio.ErrClosed. It is idempotent and may be called from a callback;
// called from OnData, the data slice stays valid until OnData returns, and
// Close returns at once: the placed messages (the rest of the read being
// dispatched, then the read-out) and OnConnectionClosed follow on the
// poller goroutine once the callback has returned.
func (r *ReceiveEndpoint) Close() error {
	r.l.poller.Do(func() { r.teardown(netio.ErrClosed) })
	r.l.poller.Do(endedBarrier)
	return nil
}

// endedBarrier, run by Do after a teardown, returns once every teardown a
// callback began before it has ended (their ends were queued first, and
// the run queue is first in, first out), so a Close from another
// goroutine returns after the connection has ended even when a callback
// closed it first.
func endedBarrier() {}

// watchIdle ends the connection when no message has arrived for timeout
// (ListenConfig.IdleTimeout). It runs on the poller goroutine.
//
// The watch counts the messages the poller has taken, so a poller kept
// from running (a loaded machine, a callback that blocked) looks like a
// silent peer to it. sendcore.StallWatch therefore confirms its verdict
// once the poller has read its completion queue empty: if messages were
// taken since the verdict, the peer was not silent, and the watch goes on
// instead of closing a connection whose messages were waiting.
func (r *ReceiveEndpoint) watchIdle(timeout time.Duration) {
	activity := func() (bool, uint64) { return true, r.messages.Load() + r.errors.Load() }
	ended := func() bool { return r.state.Load() == stateClosed }
	r.idle = sendcore.StallWatch(r.l.poller, timeout, activity, ended, func() {
		reason := fmt.Errorf("%w: %w: no message for %v", netio.ErrConnectionClosed, netio.ErrTimeout, timeout)
		r.l.log.Warn().Uint64("conn", r.id).Str("peer", r.peer).Dur("timeout", timeout).Msg("receive idle timeout: closing the connection")
		r.teardown(reason)
	})
}
