package endpoint

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
)

// ListenConfig configures a listener and the receive endpoint it runs for
// every connection.
type ListenConfig struct {
	// Params sets the size and number of the buffers each connection keeps
	// posted (defaults apply to zero fields). A message larger than
	// Params.BufferSize cannot be received.
	Params netio.ReceiveParams
	// Buffers, when set, is where each accepted connection leases its
	// Params.BufferCount buffers of at least Params.BufferSize bytes,
	// instead of registering a region of its own: a free buffer, else a
	// new one within the pool's Budget (pool.Pool.GetOrExtend). The
	// buffers go back when the connection ends, once its endpoint is
	// closed. A connection the pool cannot supply is rejected (and
	// logged); the listener goes on serving others. The pool must belong
	// to the listener's domain and be registered with domain.AccessRecv.
	// The caller closes it after the listener.
	Buffers *pool.Pool
	// OnData is called for every message received. data is valid only
	// during the call: the buffer is posted again as soon as OnData
	// returns, so copy what you keep. It runs on the poller goroutine and
	// must not block. Exactly one of OnData and OnMessage is required.
	OnData func(ep *ReceiveEndpoint, data []byte)
	// OnMessage, instead of OnData, decodes every received message as a
	// buffer of coalesced messages (netio3's format, docs/wire.md; sent by
	// a SendEndpointBuffered with SendConfig.Coalesce) and is called for
	// each message in it, in order: its tag, payload and status (0 when it
	// carried none). data is valid only during the call. A malformed buffer
	// delivers the messages before the bad one, then is counted
	// (ReceiveStats.MalformedBuffers), logged and reported to
	// OnReceiveError with an error matching coalesce.ErrMalformed; the
	// connection goes on. After a callback closes the endpoint, the rest
	// of the buffer is not delivered. It runs on the poller goroutine and
	// must not block.
	OnMessage func(ep *ReceiveEndpoint, tag uint64, data []byte, status uint8)
	// OnConnectionEstablished is called once a connection is accepted and
	// its buffers are posted. It runs on the poller goroutine. May be nil.
	OnConnectionEstablished func(ep *ReceiveEndpoint)
	// OnConnectionClosed is called once for every established connection
	// when it ends: with netio.ErrClosed after a local Close, or an error
	// matching netio.ErrConnectionClosed when the peer shut down or the
	// connection broke. It runs on the poller goroutine. May be nil.
	OnConnectionClosed func(ep *ReceiveEndpoint, err error)
	// OnReceiveError is called for a receive that completed with an error
	// (a message larger than the buffer, for example): the message is lost
	// and this is how the loss is reported. With OnMessage it is also
	// called for a malformed buffer. It runs on the poller goroutine. May
	// be nil; the error is logged in any case.
	OnReceiveError func(ep *ReceiveEndpoint, err error)
	// Admit decides whether to accept a connection request from peer
	// ("ip:port"), before anything is allocated for it: a non-nil error
	// rejects it (the peer's dial fails with netio.ErrConnectionRefused)
	// and is logged. It runs on the poller goroutine and must not block.
	// Nil admits every peer.
	Admit func(peer string) error
	// MaxConnections caps the connections served at once, counting those
	// being set up: requests beyond it are rejected before any buffer is
	// registered, so a flood of requests cannot exhaust registered memory.
	// 0 means no cap.
	MaxConnections int
	// IdleTimeout closes a connection on which no message has arrived for
	// this long, with an error matching netio.ErrConnectionClosed and
	// netio.ErrTimeout: a peer that connects and never sends cannot hold
	// buffers (or one of MaxConnections) forever. It also reclaims
	// connections whose end the provider never reports: libfabric 1.17's
	// sockets misses the peer's close when it comes right after the accept
	// (3-20% of fast dial/close cycles here). 0 disables it.
	IdleTimeout time.Duration
	// RMA tunes the RMA transfers (ReceiveEndpoint.Pull and Push) made on
	// accepted connections; defaults apply to zero fields.
	RMA RMAParams
	// Runtime names the poller to share and the logger. All connections
	// of a listener share its poller.
	Runtime
}

// Listener accepts connections and runs a ReceiveEndpoint for each.
type Listener struct {
	cfg       ListenConfig
	mgr       *domain.Manager
	poller    *poll.Poller
	ownPoller *cq.Poller // the listener's own poller, or nil
	owner     poll.Owner
	pep       *fabric.PassiveEndpoint
	info      *fabric.Info // freed after pep is closed
	addr      string
	log       zerolog.Logger

	mu      sync.Mutex
	conns   map[*ReceiveEndpoint]struct{}
	closed  bool
	retired ReceiveStats // what connections that ended received

	closer   sendcore.Closer
	accepted atomic.Uint64
	rejected atomic.Uint64
}

// Listen starts accepting connections on addr ("HOST:PORT"; port 0 picks a
// free port, see Addr) in mgr's domain.
func Listen(mgr *domain.Manager, addr string, cfg ListenConfig) (*Listener, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	}
	if err := cfg.checkDelivery(); err != nil {
		return nil, err
	}
	cfg.Params = cfg.Params.WithDefaults()
	if err := cfg.Params.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.RMA.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConnections < 0 || cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("%w: endpoint: negative MaxConnections %d or IdleTimeout %v",
			netio.ErrInvalidArgument, cfg.MaxConnections, cfg.IdleTimeout)
	}
	if cfg.Buffers != nil {
		if err := slots.CheckPool(cfg.Buffers, mgr, domain.AccessRecv); err != nil {
			return nil, err
		}
	}
	if rx := mgr.Info().RxSize(); rx > 0 && cfg.Params.BufferCount > rx {
		return nil, fmt.Errorf("%w: endpoint: %d receive buffers, but %s keeps at most %d posted",
			netio.ErrInvalidArgument, cfg.Params.BufferCount, mgr.Provider(), rx)
	}
	host, port, err := splitAddr(addr, true)
	if err != nil {
		return nil, err
	}
	l := &Listener{cfg: cfg, mgr: mgr, log: cfg.Logger, conns: make(map[*ReceiveEndpoint]struct{})}
	if err := l.open(host, port); err != nil {
		_ = l.release()
		return nil, fmt.Errorf("endpoint: listen %s: %w", addr, err)
	}
	l.log.Debug().Str("addr", l.addr).Msg("listening")
	return l, nil
}

func (l *Listener) open(host, port string) error {
	var err error
	if l.poller, l.ownPoller, err = sendcore.AttachPoller(l.mgr, l.cfg.Poller, l.cfg.PollerConfig); err != nil {
		l.poller = nil
		return err
	}
	if l.owner, err = l.poller.Register(listenHandler{l}); err != nil {
		return err
	}
	// Like every info an endpoint is opened with, it lives as long as the
	// passive endpoint (see SendEndpointBuffered.info).
	if l.info, err = infoFor(l.mgr, host, port, true, l.mgr.Caps()); err != nil {
		return err
	}
	if l.pep, err = l.mgr.Fabric().OpenPassiveEndpoint(l.info, l.owner.EndpointContext()); err != nil {
		return err
	}
	if err = l.pep.Bind(l.poller.EQ()); err != nil {
		return err
	}
	if err = l.pep.Listen(); err != nil {
		return err
	}
	l.addr, err = l.pep.Addr()
	return err
}

// Addr returns the bound address, "ip:port", with the port chosen when the
// listener was asked for port 0.
func (l *Listener) Addr() string { return l.addr }

// Connections returns the receive endpoints of the live connections.
func (l *Listener) Connections() []*ReceiveEndpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*ReceiveEndpoint, 0, len(l.conns))
	for c := range l.conns {
		out = append(out, c)
	}
	return out
}

// Accepted returns how many connections were accepted so far.
func (l *Listener) Accepted() uint64 { return l.accepted.Load() }

// Rejected returns how many connection requests were rejected so far: by
// Admit or MaxConnections, for want of buffers or registrations, or because
// the listener was closing.
func (l *Listener) Rejected() uint64 { return l.rejected.Load() }

// listenHandler is the listener's poll.Handler, kept apart so that users
// cannot call the handler methods. The passive endpoint posts no
// operations, so no completion arrives.
type listenHandler struct{ l *Listener }

func (listenHandler) HandleCompletion(uint32, poll.Result) {}
func (h listenHandler) HandleEvent(ev fabric.Event)        { h.l.handleEvent(ev) }

// handleEvent accepts connection requests. It runs on the poller goroutine.
func (l *Listener) handleEvent(ev fabric.Event) {
	switch ev.Kind {
	case fabric.EventConnReq:
		l.accept(ev.Info) // takes ownership of ev.Info
	case fabric.EventError:
		ev.Info.Free()
		l.log.Warn().Err(ev.Err).Msg("listener error event")
	default:
		ev.Info.Free()
	}
}

// accept sets up a receive endpoint for the request and accepts it, or
// rejects the request when that fails.
func (l *Listener) accept(info *fabric.Info) {
	r := &ReceiveEndpoint{l: l, id: l.accepted.Load() + l.rejected.Load() + 1}
	err := l.admit(info)
	if err == nil {
		err = r.open(info)
	}
	if err != nil {
		l.rejected.Add(1)
		l.log.Warn().Err(err).Msg("rejecting connection")
		r.release(err)
		if rerr := l.pep.Reject(info); rerr != nil {
			l.log.Warn().Err(rerr).Msg("reject")
		}
		info.Free()
		return
	}
	r.info = info // lives as long as the endpoint, as every info does
	l.accepted.Add(1)
	l.mu.Lock()
	l.conns[r] = struct{}{}
	l.mu.Unlock()
}

// admit says why a connection request must be rejected, or nil: the
// listener is closing, it serves MaxConnections already, or Admit refuses
// the peer.
func (l *Listener) admit(info *fabric.Info) error {
	l.mu.Lock()
	closed, n := l.closed, len(l.conns)
	l.mu.Unlock()
	if closed {
		return errors.New("listener closed")
	}
	if limit := l.cfg.MaxConnections; limit > 0 && n >= limit {
		return fmt.Errorf("%w: %d connections, the most MaxConnections allows", netio.ErrNoResources, n)
	}
	if l.cfg.Admit == nil {
		return nil
	}
	peer, err := info.PeerAddr()
	if err != nil {
		return fmt.Errorf("peer address unknown, so not admitted: %w", err)
	}
	if err := l.cfg.Admit(peer); err != nil {
		return fmt.Errorf("not admitted: %s: %w", peer, err)
	}
	return nil
}

// retire forgets an ended connection and keeps its counters in the
// listener's totals, in one step so that Stats counts it exactly once.
func (l *Listener) retire(r *ReceiveEndpoint) {
	s := r.Stats()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[r]; !ok {
		return
	}
	delete(l.conns, r)
	l.retired.add(s)
}

// ListenerStats counts what a listener did over its whole life.
type ListenerStats struct {
	Accepted uint64 // connection requests accepted
	Rejected uint64 // connection requests rejected (see Rejected)
	Active   int    // connections served now
	// Received sums the ReceiveStats of every connection, live and ended,
	// so errors stay counted after the connection that saw them is gone.
	Received ReceiveStats
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ListenerStats{Accepted: l.accepted.Load(), Rejected: l.rejected.Load(), Active: len(l.conns), Received: l.retired}
	for r := range l.conns {
		s.Received.add(r.Stats())
	}
	return s
}

// add sums o into s.
func (s *ReceiveStats) add(o ReceiveStats) {
	s.Messages += o.Messages
	s.Bytes += o.Bytes
	s.Errors += o.Errors
	s.CoalescedMessages += o.CoalescedMessages
	s.MalformedBuffers += o.MalformedBuffers
}

// Close stops accepting, closes every connection (each gets its
// OnConnectionClosed with netio.ErrClosed and the peer sees it closed), and
// stops the listener's own poller. The listening port is released when the
// poller stops: with a shared poller, when that poller is closed (requests
// arriving until then are rejected). It is idempotent and may be called
// from a callback.
func (l *Listener) Close() error {
	return l.closer.Close(l.poller, func() error {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.poller.Do(func() {
			for _, r := range l.Connections() {
				r.teardown(netio.ErrClosed)
			}
		})
		return l.release()
	})
}

// release frees what open set up. The passive endpoint is closed only once
// the poller has stopped reading the event queue: tcp in libfabric 1.17
// builds connection requests from freed memory when the queue is read
// after fi_close of a listening endpoint.
func (l *Listener) release() error {
	if l.poller == nil {
		return nil
	}
	l.poller.Unregister(l.owner)
	var pepErr error
	l.poller.AtStop(func() {
		pepErr = l.pep.Close()
		l.info.Free()
	})
	if l.ownPoller == nil {
		return nil
	}
	err := l.ownPoller.Close()
	return errors.Join(pepErr, err)
}

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
	l      *Listener
	id     uint64
	owner  poll.Owner
	ep     *fabric.Endpoint
	bufs   *slots.Memory
	local  atomic.Pointer[string] // set once connected, before OnConnectionEstablished
	info   *fabric.Info
	rmaOps                // PullAsync, PushAsync, Pull, Push; completion keys have rmaKeyFlag set
	post   sendcore.Guard // the endpoint for RMA posts, against its close

	// Poller goroutine only: a Close from inside OnData must not unmap the
	// slice OnData is still looking at, so the memory goes after it returns.
	inOnData, freeAfterOnData bool
	// Poller goroutine only: delivering what is left after the peer's
	// shutdown (see drain).
	draining                bool
	drainStart, lastMessage time.Time
	drainTimer              *time.Timer

	state                   atomic.Uint32
	messages, bytes, errors atomic.Uint64

	dec                coalesce.Decoder // poller goroutine only: for OnMessage
	decoded, malformed atomic.Uint64

	idle      *time.Timer // IdleTimeout's check; set once connected
	truncated atomic.Bool // a message larger than the buffers arrived
}

// open registers or leases the buffers, opens the endpoint for the
// request, posts every buffer and accepts. It runs on the poller goroutine.
func (r *ReceiveEndpoint) open(info *fabric.Info) error {
	l := r.l
	p := l.cfg.Params
	var err error
	if r.owner, err = l.poller.Register(receiveHandler{r}); err != nil {
		return err
	}
	if l.cfg.Buffers != nil {
		r.bufs, err = slots.Lease(l.mgr, l.cfg.Buffers, p.BufferSize, p.BufferCount, domain.AccessRecv)
	} else {
		r.bufs, err = slots.Cut(l.mgr, p.BufferSize, p.BufferCount, domain.AccessRecv)
	}
	if err != nil {
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
	return r.ep.Accept()
}

// postAll posts every buffer in one call.
func (r *ReceiveEndpoint) postAll() error {
	n := r.l.cfg.Params.BufferCount
	addrs, lens := make([]uintptr, n), make([]uint64, n)
	descs, ctxs := make([]uintptr, n), make([]uint64, n)
	for i := range r.bufs.Len() {
		b := r.bufs.Piece(uint32(i))
		addrs[i], lens[i], descs[i] = b.Addr, uint64(len(b.Bytes)), b.Desc
		ctxs[i] = r.owner.Context(uint32(i))
	}
	for done := 0; done < n; {
		posted, errno := r.ep.RecvBatch(addrs[done:], lens[done:], descs[done:], ctxs[done:])
		if errno != 0 {
			return fmt.Errorf("endpoint: posting %d receive buffers (%d posted): %w", n, done, errno)
		}
		done += posted
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
	if isRMAKey(key) {
		r.rmaOps.handleCompletion(key, res)
		return
	}
	if r.state.Load() == stateClosed || res.Flags&fabric.FlagRecv == 0 && res.Status == netio.OK {
		return
	}
	if res.Status != netio.OK {
		r.receiveFailed(key, res)
		return
	}
	data := r.bufs.Piece(key).Bytes[:res.Len:res.Len]
	r.messages.Add(1)
	r.bytes.Add(uint64(res.Len))
	if r.draining {
		r.lastMessage = time.Now()
	}
	r.inOnData = true
	r.deliver(data)
	r.inOnData = false
	if r.freeAfterOnData {
		r.freeBuffers() // OnData closed the endpoint
		return
	}
	r.repost(key)
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
	b := r.bufs.Piece(key)
	if errno := r.ep.Recv(b.Addr, len(b.Bytes), b.Desc, r.owner.Context(key)); errno != 0 {
		r.errors.Add(1)
		r.l.log.Error().Uint64("conn", r.id).Err(errno).Msg("reposting receive buffer")
	}
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
		r.l.log.Debug().Uint64("conn", r.id).Msg("connection established")
		if cb := r.l.cfg.OnConnectionEstablished; cb != nil {
			cb(r)
		}
	case ev.Kind == fabric.EventShutdown && r.state.Load() == stateConnected:
		r.drain()
	case ev.Kind != fabric.EventConnected:
		r.teardown(r.peerClosed(closeReason(ev)))
	}
}

// How long a receive endpoint keeps delivering after the peer shut down.
// The quiet period must outlast a scheduling gap of the provider's progress
// thread on a loaded machine: at 20 ms, a 2-core machine at load 15 lost up
// to 95% of what sockets still held.
const (
	drainQuiet = 100 * time.Millisecond // close after this long without a message
	drainMax   = 5 * time.Second        // and in any case after this long
)

// peerClosed is why the peer ended the connection: tcp drops a connection
// whose peer sent a message larger than the posted buffers, and the
// truncation is the real cause, so it is named.
func (r *ReceiveEndpoint) peerClosed(reason error) error {
	if r.truncated.Load() {
		return fmt.Errorf("%w (after a message larger than the %d-byte receive buffers: %w)",
			reason, r.l.cfg.Params.BufferSize, fabric.ETRUNC)
	}
	return reason
}

// drain starts closing after the peer's shutdown without losing what the
// provider already holds: the sockets provider reports the shutdown while
// messages it has accepted still wait for posted buffers. The endpoint keeps
// delivering and closes once no message has come for drainQuiet. It runs
// on the poller goroutine.
func (r *ReceiveEndpoint) drain() {
	if r.draining {
		return
	}
	now := time.Now()
	r.draining, r.drainStart, r.lastMessage = true, now, now
	r.drainTimer = time.AfterFunc(drainQuiet, r.checkDrain)
}

// checkDrain runs on the drain timer; the decision runs on the poller
// goroutine.
func (r *ReceiveEndpoint) checkDrain() {
	r.l.poller.Do(func() {
		if r.state.Load() == stateClosed {
			return
		}
		now := time.Now()
		if now.Sub(r.lastMessage) >= drainQuiet || now.Sub(r.drainStart) >= drainMax {
			r.teardown(r.peerClosed(netio.ErrConnectionClosed))
			return
		}
		r.drainTimer.Reset(drainQuiet)
	})
}

// teardown ends the connection once and frees its buffers; an established
// connection gets its OnConnectionClosed. It runs on the poller goroutine.
func (r *ReceiveEndpoint) teardown(reason error) {
	prev := r.state.Swap(stateClosed)
	if prev == stateClosed {
		return
	}
	if r.drainTimer != nil {
		r.drainTimer.Stop()
	}
	if r.idle != nil {
		r.idle.Stop()
	}
	r.l.retire(r)
	r.release(reason) // closing the endpoint tells the peer; see closeEndpoint
	r.l.log.Debug().Uint64("conn", r.id).Err(reason).Msg("connection closed")
	if cb := r.l.cfg.OnConnectionClosed; cb != nil && prev == stateConnected {
		cb(r, reason)
	}
}

// release closes the endpoint, then frees the buffers (deregistered, or
// handed back to the pool): in that order, so the provider has let go of
// them first. RMA transfers in flight end canceled for reason.
func (r *ReceiveEndpoint) release(reason error) {
	r.l.poller.Unregister(r.owner)
	r.post.Close(func() { // no RMA post may race with the close
		if err := r.ep.Close(); err != nil {
			r.l.log.Error().Err(err).Msg("closing endpoint")
		}
	})
	r.rmaOps.cancelPending(reason)
	r.info.Free()
	if r.inOnData {
		r.freeAfterOnData = true
		return
	}
	r.freeBuffers()
}

func (r *ReceiveEndpoint) freeBuffers() {
	if r.bufs == nil {
		return
	}
	if err := r.bufs.Close(); err != nil {
		r.l.log.Error().Err(err).Msg("freeing receive buffers")
	}
	r.bufs = nil
}

// Close closes this connection; the peer sees it closed and
// OnConnectionClosed runs with netio.ErrClosed. It is idempotent and may be
// called from a callback; called from OnData, the data slice stays valid
// until OnData returns.
func (r *ReceiveEndpoint) Close() error {
	r.l.poller.Do(func() { r.teardown(netio.ErrClosed) })
	return nil
}
