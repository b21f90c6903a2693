package rdm

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/coalescer"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/internal/zerocopy"
	"github.com/netio-go/netio/stats"
)

// Endpoint is a connectionless endpoint: it sends to and receives from
// every peer it knows through one libfabric endpoint. It is safe for
// concurrent use.
type Endpoint struct {
	c      sendcore.Core
	cfg    Config
	mgr    *domain.Manager
	addr   string
	holder uint64
	info   *fabric.Info // freed after the endpoint is closed
	// injectSize is the provider's inject_size, read at Open: info is
	// freed at Close, while Inject may still be asked.
	injectSize int
	// counted: the endpoint holds a claim of its process (perprocess.go),
	// given back once its libfabric endpoint is closed, by whichever path
	// closes it (Close, a teardown, a failed Open).
	counted atomic.Bool

	bufs  sendcore.Buffers
	dests []Peer // by buffer ID: where a posted buffer goes
	peers peers
	cos   coalescers     // with Config.Coalesce: the peers' coalescers that ended
	zc    zerocopy.Sends // header slots, when Config.ZeroCopy is set
	inj   injects        // the inject queue
	park  parking        // sends the provider refused for now, by peer (poller goroutine only)
	run   injectRun      // PostRun's scratch (poller goroutine only)

	closer          sendcore.Closer // Close once, the shared poller released after
	recv            *slots.Memory   // receive buffers, all posted while open
	inOnData        bool            // poller goroutine only
	freeAfterOnData bool            // poller goroutine only: Close ran inside OnData

	dec                                             coalesce.Decoder // poller goroutine only: for OnMessage
	received, receivedBytes, receiveErrors, decoded atomic.Uint64
}

// Open binds a connectionless endpoint to addr in mgr's domain, which must
// have been opened with Endpoints: domain.EndpointRDM. For the IP
// providers addr is "HOST:PORT" with the domain's host (port 0 picks a
// free port); for a provider of named addresses (shm) it is a name, or ""
// to let the provider make one. Addr returns what peers add. On shm a
// second endpoint in the process, in any domain, is refused with an error
// matching ErrOneEndpointPerProcess (and netio.ErrNotSupported) unless it
// and every open one set Config.ShareProcess.
func Open(mgr *domain.Manager, addr string, cfg Config) (*Endpoint, error) {
	if err := cfg.validate(mgr); err != nil {
		return nil, err
	}
	node, service, err := splitLocal(mgr, addr)
	if err != nil {
		return nil, err
	}
	counted, err := claimProcess(mgr.Provider(), cfg.ShareProcess)
	if err != nil {
		return nil, fmt.Errorf("rdm: open %q: %w", addr, err)
	}
	poller, err := acquirePoller(mgr, cfg.Poller, cfg.PollerConfig)
	if err != nil {
		if counted {
			releaseProcess(cfg.ShareProcess)
		}
		return nil, err
	}
	e := &Endpoint{cfg: cfg, holder: sendcore.NewHolder(), mgr: mgr}
	e.counted.Store(counted)
	opts := sendcore.Options{Poller: poller, Log: cfg.Logger, OnSendCompleted: cfg.OnSendCompleted, PostOnPoller: true,
		ReportedAtPost: injectKey} // postInject reports an untracked inject as the provider takes it
	if err := e.open(mgr, node, service, opts); err != nil {
		e.c.MarkTornDown()
		err = joinRelease(fmt.Errorf("rdm: open %q: %w", addr, err), e.c.Release())
		e.releaseProcess()
		return nil, joinRelease(err, releasePoller(mgr))
	}
	e.c.Register(stats.KindRDM)
	if cfg.ProgressTimeout > 0 {
		e.c.WatchProgress(cfg.ProgressTimeout)
	}
	e.c.Log.Debug().Str("addr", e.addr).Str("provider", mgr.Provider()).Msg("rdm endpoint open")
	return e, nil
}

// splitLocal turns the local address into getinfo's node and service.
func splitLocal(mgr *domain.Manager, addr string) (node, service string, err error) {
	if quirks.For(mgr.Provider()).NamedAddresses {
		return addr, "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) == nil {
		return "", "", fmt.Errorf("%w: rdm: local address %q is not IP:PORT", netio.ErrBadAddress, addr)
	}
	return host, port, nil
}

func joinRelease(err, releaseErr error) error {
	if releaseErr != nil {
		return fmt.Errorf("%w (and releasing: %v)", err, releaseErr)
	}
	return err
}

// open sets everything up in order; on error the caller releases it. The
// provider's part runs on the poller goroutine (see poller.go).
func (e *Endpoint) open(mgr *domain.Manager, node, service string, opts sendcore.Options) error {
	if err := e.c.Attach(mgr, (*kind)(e), handler{e}, e.closeEndpoint, opts); err != nil {
		return err
	}
	var err error
	e.c.Poller.Do(func() { err = e.openOnPoller(mgr, node, service) })
	return err
}

func (e *Endpoint) openOnPoller(mgr *domain.Manager, node, service string) error {
	var err error
	if e.bufs, err = sendcore.OpenBuffers(e.cfg.Buffers, mgr, e.cfg.Send); err != nil {
		return err
	}
	e.dests = make([]Peer, e.bufs.Pool.Len())
	if zc := e.cfg.ZeroCopy; zc != nil {
		if err = e.zc.Open(mgr, zc.settings()); err != nil {
			return err
		}
	}
	if e.recv, err = slots.Cut(mgr, e.cfg.Receive.BufferSize, e.cfg.Receive.BufferCount, domain.AccessRecv); err != nil {
		return err
	}
	h := fabric.Hints{Provider: mgr.Provider(), Node: node, Service: service, Source: node != "" || service != "",
		Fabric: mgr.Info().FabricName(), Domain: mgr.Info().DomainName(), EPType: fabric.EPRDM, Caps: mgr.Caps()}
	if e.info, err = fabric.GetInfo(h); err != nil {
		return err
	}
	e.injectSize = e.info.InjectSize()
	e.inj.init(e.cfg.InjectQueue, e.injectSize, e.cfg.MaxPeers)
	e.inj.ok.core = &e.c
	if err = e.inj.ok.init(mgr, e.cfg.MaxPeers, e.bufs.Pool.Len()+e.zc.Len(), e.inj.len(), e.injectSize); err != nil {
		return err
	}
	// Every send is queued for the poller once at most: room for all, and
	// for the RunMax entries of a run PostRun posted (freeing their inject
	// slots for new sends) before popRun removes them.
	sends := e.bufs.Pool.Len() + e.zc.Len() + e.inj.len()
	e.c.InitHandOff(sends+sendcore.RunMax, e.postSend)
	e.park.init(e.cfg.MaxPeers, sends, e.cfg.PeerTimeout, e.retryTimer, e.postTo, e.c.Poller)
	e.run.post = (*fabric.Endpoint).InjectRunTo
	av, err := mgr.Domain().OpenAV(e.cfg.MaxPeers)
	if err != nil {
		return err
	}
	e.peers.init(av, mgr.Provider(), e.cfg.MaxPeers)
	if e.cfg.Coalesce != nil {
		e.peers.newCo = e.newCoalescer
	}
	ep, err := mgr.Domain().OpenEndpoint(e.info, e.c.Owner.EndpointContext())
	e.c.Guard.Set(ep)
	if err != nil {
		return err
	}
	if err = e.enable(ep, av); err != nil {
		return err
	}
	if e.addr, err = localAddr(ep, mgr.Provider()); err != nil {
		return err
	}
	if quirks.For(mgr.Provider()).UnknownSourceIsZero {
		return e.peers.reserveZero(ep)
	}
	return nil
}

// enable binds the endpoint to the address vector and the poller's queue,
// enables it and posts every receive buffer.
func (e *Endpoint) enable(ep *fabric.Endpoint, av *fabric.AV) error {
	if err := ep.BindAV(av); err != nil {
		return err
	}
	if err := ep.BindCQ(e.c.Poller.CQ(), fabric.BindTransmit|fabric.BindRecv); err != nil {
		return err
	}
	if err := ep.Enable(); err != nil {
		return err
	}
	return e.postReceives(ep)
}

// localAddr is the address a peer adds: "IP:PORT", or the provider's name.
func localAddr(ep *fabric.Endpoint, provider string) (string, error) {
	if !quirks.For(provider).NamedAddresses {
		return ep.Addr()
	}
	raw, err := ep.Name()
	if err != nil {
		return "", err
	}
	for i, b := range raw {
		if b == 0 {
			raw = raw[:i]
			break
		}
	}
	return string(raw), nil
}

// Addr returns the bound address, as a peer passes it to AddPeer.
func (e *Endpoint) Addr() string { return e.addr }

// AddPeer makes the peer at addr ("HOST:PORT", or a name for shm) known
// and returns its handle. Adding a peer twice returns the same handle,
// also when Config.MaxPeers peers are held. An address that does not parse
// for the provider, a peer name holding a NUL byte, or on shm the name of
// a closed endpoint of this process (ErrRetiredName), is an error matching
// netio.ErrBadAddress; a new peer past Config.MaxPeers, one matching
// netio.ErrNoResources; after Close, netio.ErrClosed.
func (e *Endpoint) AddPeer(addr string) (Peer, error) {
	var p Peer
	err := e.onPoller(func() error {
		var err error
		p, err = e.peers.add(addr)
		return err
	})
	if err != nil {
		return Peer{}, fmt.Errorf("rdm: add peer: %w", err)
	}
	return p, nil
}

// onPoller runs fn on the poller goroutine, where every provider call of
// the domain runs (poller.go), while the endpoint is open: ErrClosed
// otherwise. The guard is taken there, not by the caller: a caller that
// held it while waiting for the poller would deadlock with a teardown
// running on the poller, which takes it exclusively.
func (e *Endpoint) onPoller(fn func() error) error {
	err := netio.ErrClosed
	e.c.Poller.Do(func() {
		if _, ok := e.c.Guard.Acquire(); ok {
			err = fn()
			e.c.Guard.Release()
		}
	})
	return err
}

// RemovePeer forgets p and removes it from the address vector. New sends
// to it are refused; sends to it still queued for the poller or parked
// fail (EHOSTUNREACH), and those the provider holds already complete as it
// decides (OK on tcp;ofi_rxm and sockets: TestRemovePeerInFlight), each
// reported once; messages in its coalescing buffer that were not posted are
// dropped, logged and counted (CoalesceStats.Dropped): Flush first and wait
// for the completion to avoid that. The injects to it the provider took
// and nothing confirmed sent (see Inject) are logged and counted in
// Stats.InjectsUnconfirmed, but for those its tracked inject still in
// flight will confirm: they count only if it fails or is canceled; that
// inject holds its confirm slot until then (Stats.InjectConfirmsHeld),
// while a peer added into p's slot goes on without it. A restarted peer
// needs RemovePeer and AddPeer again. Unknown or removed peers are an error
// matching netio.ErrInvalidArgument.
func (e *Endpoint) RemovePeer(p Peer) error {
	err := netio.ErrClosed
	e.c.Poller.Do(func() {
		if _, ok := e.c.Guard.Acquire(); !ok {
			return
		}
		e.cos.mu.Lock() // CoalesceStats sees the peer's counts in the table or among the ended
		var co *coalescer.Coalescer
		co, err = e.peers.remove(p)
		e.endCoalescerLocked(co) // its unposted messages are dropped and counted
		e.cos.mu.Unlock()
		e.c.Guard.Release()
		if err == nil {
			e.forgetPeer(p)
			// Before a new peer takes the slot, and after the guard is
			// released: the reports run callbacks, which may Close.
			e.park.lanes[p.slot].unreachable = false
			e.failLane(p.slot, errRemoved)
		}
	})
	if err != nil {
		if errors.Is(err, netio.ErrClosed) {
			return fmt.Errorf("rdm: remove peer: %w", err)
		}
		return err
	}
	return nil
}

// PeerAddr returns the address p was added by (or learned as), "" for an
// unknown peer.
func (e *Endpoint) PeerAddr(p Peer) string { return e.peers.name(p) }

// Peers returns the number of known peers.
func (e *Endpoint) Peers() int { return e.peers.count() }

// Close closes the endpoint: with Config.Coalesce every peer's buffer is
// posted first (Flush), then every pending key is reported with Canceled,
// every buffer goes back, the peers leave the address vector, and the
// endpoint's own poller stops. Before all that it waits, up to
// Config.InjectLinger, until nothing is queued and either the injects the
// provider took are confirmed sent and no tracked inject is in flight (see
// Inject), or no send is pending;
// called from a callback of this endpoint's poller it does not wait, but
// called from a callback of another domain's endpoint it blocks that
// poller meanwhile (set InjectLinger negative there). It is idempotent and
// may be called from a callback.
func (e *Endpoint) Close() error {
	e.lingerInjects()
	return e.closer.Close(e.c.Poller, func() error {
		e.flushAllOnClose()
		return joinRelease(e.c.Close(), releasePoller(e.mgr))
	})
}

// releaseProcess gives back the endpoint's claim of its process, if it
// still holds one (claimProcess).
func (e *Endpoint) releaseProcess() {
	if e.counted.CompareAndSwap(true, false) {
		releaseProcess(e.cfg.ShareProcess)
	}
}

// closeEndpoint closes the libfabric endpoint, then frees its info and
// gives back the endpoint's claim of the process; its name stays retired
// (retireName). If fi_close fails the claim is kept for the process's life:
// the region may still be mapped and in use, and another endpoint of the
// process must not open beside it as if it were gone.
func (e *Endpoint) closeEndpoint() {
	if ep := e.c.Guard.Endpoint(); ep != nil {
		e.forgetOnClose()
		e.retireName(ep)
		if err := ep.Close(); err != nil {
			e.c.Log.Error().Err(err).Bool("claimKept", e.counted.Swap(false)).Msg("closing rdm endpoint")
		}
	}
	e.info.Free()
	e.releaseProcess() // its region is unmapped now (perprocess.go)
}

// retireName records the endpoint's name as a closed one's (perprocess.go),
// asking the provider for it when Open failed before learning it.
func (e *Endpoint) retireName(ep *fabric.Endpoint) {
	if !quirks.For(e.mgr.Provider()).RegionsSharedInProcess {
		return
	}
	name := e.addr
	if name == "" {
		name, _ = localAddr(ep, e.mgr.Provider()) // "" if it cannot say: nothing to refuse
	}
	retireName(e.mgr.Provider(), name)
}

// handler routes the endpoint's completions: receives by their key's mark,
// sends to the send core. It is kept apart so that users cannot call it.
type handler struct{ e *Endpoint }

func (h handler) HandleCompletion(key uint32, r poll.Result) {
	if key&recvKey != 0 {
		h.e.receiveCompleted(key&^recvKey, r)
		return
	}
	from := noLane
	if h.e.park.count > 0 {
		from = h.e.peerOfKey(key).slot // before the report frees what names it
	}
	h.e.confirmed(key, r.Status == netio.OK)
	h.e.c.Complete((*kind)(h.e), key, r)
	h.e.c.AfterCompletion()
	h.e.retryParked(from) // a completion may have made room for a parked send
}

// HandleEvent: connectionless endpoints have no connection events.
func (handler) HandleEvent(ev fabric.Event) { ev.Info.Free() }

// releaseResources gives back the buffers and the peers; the endpoint is
// closed, so the provider holds none of them. Receive memory a running
// OnData still reads goes when OnData returns.
func (e *Endpoint) releaseResources() error {
	err := e.inj.ok.closeConfirms()
	if e.bufs.Pool != nil {
		if berr := e.bufs.Close(e.holder); err == nil {
			err = berr
		}
	}
	if zerr := e.zc.Release(); err == nil {
		err = zerr
	}
	if e.peers.av != nil {
		e.peers.removeAll()
		if cerr := e.peers.av.Close(); err == nil {
			err = cerr
		}
	}
	if e.inOnData {
		e.freeAfterOnData = true
		// The registry folds the counters once this returns: count the
		// messages OnMessage was given from this buffer now (deliver
		// does not); OnData's receive was counted before OnData ran.
		e.decoded.Add(uint64(e.dec.Count()))
	} else if e.recv != nil {
		if cerr := e.recv.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
