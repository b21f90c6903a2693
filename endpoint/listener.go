package endpoint

import (
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
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/stats"
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
	// The caller closes it after the listener. It covers receive buffers
	// only: with Replies, each accepted connection also registers its own
	// reply pool (Replies.Params.BufferCount × BufferSize) at accept time.
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
	// Each connection registers its receive buffers (Params.BufferCount ×
	// BufferSize, unless leased from Buffers) and, with Replies, its own
	// reply pool (Replies.Params.BufferCount × BufferSize) at accept time,
	// so the registered memory is bounded by MaxConnections times their
	// sum. 0 means no cap.
	MaxConnections int
	// IdleTimeout closes a connection on which no message has arrived for
	// this long, with an error matching netio.ErrConnectionClosed and
	// netio.ErrTimeout: a peer that connects and never sends cannot hold
	// buffers (or one of MaxConnections) forever. It also reclaims
	// connections whose end the provider never reports
	// (quirks.Quirks.MissesEarlyClose: sockets misses a peer's close that
	// comes right after the accept). The watch counts the messages the
	// poller has taken, and confirms its verdict on the poller after one
	// more read of the completion queue, so that a poller kept from
	// running does not make a busy connection look silent. 0 disables it.
	IdleTimeout time.Duration
	// Replies, when set, lets every accepted connection send back to its
	// dialer on the same connection (ReceiveEndpoint.SendBuffer); see
	// ListenReplies. Nil keeps connections receive-only.
	Replies *ListenReplies
	// RMA tunes the RMA transfers (ReceiveEndpoint.Pull and Push) made on
	// accepted connections; defaults apply to zero fields.
	RMA RMAParams
	// Runtime names the poller to share and the logger. All connections
	// of a listener share its poller.
	cq.Runtime
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
	entry    *stats.Entry // the listener in its manager's stats.Registry
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
	if cfg.Replies != nil {
		r := *cfg.Replies // the caller's config stays as it was
		if err := r.validate(); err != nil {
			return nil, err
		}
		cfg.Replies = &r
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
	l := &Listener{cfg: cfg, mgr: mgr, log: mgr.Logger(cfg.Logger), conns: make(map[*ReceiveEndpoint]struct{})}
	if err := l.open(host, port); err != nil {
		_ = l.release()
		return nil, fmt.Errorf("endpoint: listen %s: %w", addr, err)
	}
	l.entry = mgr.Registry().AddListener(l.addr, l.fillStats)
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
	r.peer, _ = info.PeerAddr() // for logs and snapshots; "" when unknown
	err := l.admit(info)
	if err == nil {
		err = r.open(info)
	}
	if err != nil {
		l.rejected.Add(1)
		l.log.Warn().Str("peer", r.peer).Err(err).Msg("rejecting connection")
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
	r.entry = l.mgr.Registry().AddEndpoint(stats.Endpoint{Kind: stats.KindReceive, Peer: r.peer, Poller: l.pollerName()}, r.fillStats)
}

// pollerName is the name of the listener's poller, for snapshots.
func (l *Listener) pollerName() string {
	if l.cfg.Poller != nil {
		return l.cfg.Poller.Name()
	}
	return l.ownPoller.Name()
}

// fillStats is the listener's record in its manager's stats.Registry.
func (l *Listener) fillStats(s *stats.Listener) {
	s.Accepted, s.Refused = l.accepted.Load(), l.rejected.Load()
	l.mu.Lock() // taken on accept and close, never per message
	s.Active = len(l.conns)
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

// Close stops accepting, closes every connection (as ReceiveEndpoint.Close
// does: messages the provider placed are delivered first, then each gets
// its OnConnectionClosed with netio.ErrClosed and the peer sees it closed;
// with ListenConfig.Replies, every reply still in flight is first reported
// Canceled to ListenReplies.OnSendCompleted), and
// stops the listener's own poller. The listening port is released when the
// poller stops: with a shared poller, when that poller is closed (requests
// arriving until then are rejected). It is idempotent and may be called
// from a callback; from a completion callback of the listener's poller the
// connections end, and their OnConnectionClosed runs, after it returns.
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
		l.poller.Do(endedBarrier)
		err := l.release()
		l.entry.Remove(nil)
		return err
	})
}

// release frees what open set up. The passive endpoint is closed only once
// the poller has stopped reading the event queue, on every provider
// (quirks.Quirks.PassiveCloseReadsFreed: tcp builds connection requests
// from freed memory when the queue is read after fi_close of a listening
// endpoint).
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
