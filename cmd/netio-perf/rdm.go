package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/rdm"
	"github.com/netio-go/netio/sendbuf"
)

// --endpoint selects the endpoint kind of the sweep, server and client:
// connected (FI_EP_MSG, package endpoint) or connectionless (FI_EP_RDM,
// package rdm).
const (
	endpointMsg = "msg"
	endpointRDM = "rdm"
	// defaultRDMProvider replaces --provider's default (tcp, which has no
	// RDM endpoints in libfabric 1.17) with --endpoint rdm.
	defaultRDMProvider = "tcp;ofi_rxm"
	// rdmLinger is how long an rdm server keeps its endpoint open after
	// its --count messages arrived: there is no connection whose close
	// says the senders are done, and the providers acknowledge messages
	// (ofi_rxd, ofi_rxm's rendezvous) from the receiver's progress, so
	// closing at once could fail sends the server has received.
	rdmLinger = 300 * time.Millisecond
)

// endpointFlags are --endpoint and what it changes in the address flags.
type endpointFlags struct {
	endpoint string
	addr     string // --endpoint rdm: --listen or --connect as rdm takes it
	inject   bool   // client --inject: rdm.Endpoint.Inject, no buffers; msg: SendConfig.Inject
}

// registerEndpoint adds --endpoint (and for the client --inject) to fs.
func (e *endpointFlags) registerEndpoint(fs *flag.FlagSet) {
	fs.StringVar(&e.endpoint, "endpoint", endpointMsg, "endpoint kind: msg (connected, FI_EP_MSG) or rdm (connectionless, FI_EP_RDM: tcp;ofi_rxm (the default with rdm), udp;ofi_rxd, sockets, shm)")
	if fs.Name() == "client" {
		fs.BoolVar(&e.inject, "inject", false, "with --endpoint rdm: send each message with Inject (at most the provider's inject size; no buffers; the last inject queued to a peer and every 33rd in a row go out with a completion, see rdm.Endpoint.Inject); with --endpoint msg: SendConfig.Inject (send buffers of at most the inject size go out with fi_inject)")
	}
}

// rdm reports whether --endpoint rdm was given.
func (e *endpointFlags) rdm() bool { return e.endpoint == endpointRDM }

// check validates --endpoint and, for rdm, defaults --provider and takes
// the address flag (name, value given, defaulted) as rdm takes it:
// IP:PORT, or for a provider of named addresses (shm) a name, "" for one
// the provider makes. It reports whether the caller should parse the
// address as IP:PORT itself (msg, or an IP provider).
func (e *endpointFlags) check(fs *cmdLine, c *commonFlags, name, value string, allowZero bool) (parseIP bool, err error) {
	switch e.endpoint {
	case endpointMsg:
		return true, nil
	case endpointRDM:
	default:
		return false, fmt.Errorf("--endpoint %q: want msg or rdm", e.endpoint)
	}
	if !fs.isSet("provider") {
		c.provider = defaultRDMProvider
	}
	if !quirks.For(c.provider).NamedAddresses {
		return true, nil
	}
	if fs.isSet(name) || !allowZero {
		e.addr = value
	}
	if !allowZero && e.addr == "" {
		return false, fmt.Errorf("--%s is required: the name the server printed", name)
	}
	return false, nil
}

// rdmDomain opens a domain for connectionless endpoints, logging to log;
// ip is "" for a provider of named addresses.
func rdmDomain(provider, ip string, log zerolog.Logger) (*domain.Manager, error) {
	if quirks.For(provider).NamedAddresses {
		ip = ""
	}
	return domain.Open(domain.Config{Provider: provider, Address: ip, Endpoints: domain.EndpointRDM, Logger: log})
}

// rdmLocal returns the address an rdm endpoint binds: ip:port, or the
// name for a provider of named addresses.
func rdmLocal(provider string, hp hostPort, name string) string {
	if quirks.For(provider).NamedAddresses {
		return name
	}
	return hp.String()
}

// rdmPeer is one peer of a connectionless endpoint as the sender streams
// to it (bufferSender).
type rdmPeer struct {
	ep   *rdm.Endpoint
	peer rdm.Peer
}

func (p rdmPeer) GetBuffer() *sendbuf.NetworkBuffer { return p.ep.GetBuffer() }
func (p rdmPeer) SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	return p.ep.SendBuffer(buf, size, p.peer)
}
func (p rdmPeer) ReleaseBuffer(id uint64) (uint64, netio.Status) { return p.ep.ReleaseBuffer(id) }

// ignoreData is OnData for an endpoint that only sends.
func ignoreData(*rdm.Endpoint, rdm.Peer, []byte) {}

// rdmInjectQueue is the client's inject queue (--inject). It must be long
// enough that the poller, posting about one inject per 4 µs on
// tcp;ofi_rxm, takes longer to post half of it than a sleeping sender
// takes to wake on a busy machine, so that it does
// not run dry while the sender waits in WaitInject (docs/performance.md,
// "rdm 64 B inject: the full queue's wait"): 256 (0.5 ms) is enough for
// that. It is 1024 (2 ms) because the sender sleeps and wakes once per
// half queue posted, and the poller reads its CQ about as often: 4 times
// the queue is a quarter of those per message, for 768 more slots of
// inject_size bytes of Go memory (docs/performance.md, "rdm 64 B inject:
// the sender's context switches and Go user space").
const rdmInjectQueue = 1024

// senderReceive is the receive side of an endpoint that only sends: one
// small buffer, as rdm.Open needs some.
var senderReceive = netio.ReceiveParams{BufferSize: 64, BufferCount: 1}

// openRDM opens a connectionless endpoint at local with bufs send buffers
// of the sender's size, adds the peer at to and attaches both to s. It
// returns the endpoint.
func (s *sender) openRDM(mgr *domain.Manager, local, to string, bufs int, rt cq.Runtime) (*rdm.Endpoint, error) {
	s.setWindow(bufs)
	ep, err := rdm.Open(mgr, local, rdm.Config{
		Send:            netio.BufferedSendParams{BufferSize: s.size, BufferCount: bufs},
		Receive:         senderReceive,
		OnData:          ignoreData,
		OnSendCompleted: s.rdmCompletion(),
		InjectQueue:     rdmInjectQueue,
		Runtime:         rt,
		ShareProcess:    shareProcess,
	})
	if err != nil {
		return nil, err
	}
	peer, err := ep.AddPeer(to)
	if err != nil {
		return nil, errors.Join(err, ep.Close())
	}
	s.to = rdmPeer{ep: ep, peer: peer}
	return ep, nil
}

// runRDMClient is the client mode with --endpoint rdm: one connectionless
// endpoint at local in mgr sends --count messages to the server through
// s, waits for every completion and closes.
func runRDMClient(ctx context.Context, o clientOptions, mgr *domain.Manager, local string, s *sender, stdout io.Writer) error {
	to := o.addr
	if to == "" {
		to = o.connect.String()
	}
	if refills(o) {
		s.refill = &rdmRefill{s: s}
	}
	ep, err := s.openRDM(mgr, rdmLocal(o.provider, hostPort{IP: local}, ""), to, o.bufs, cq.Runtime{PollerConfig: o.poll.config()})
	if err != nil {
		return err
	}
	start := time.Now()
	var sendErr, drainErr error
	if o.inject {
		sendErr = s.runInject(ctx, ep, o.count)
	} else {
		if s.refill != nil {
			sendErr = s.refill.run(ctx, o.count)
		} else {
			_, sendErr = s.run(ctx, o.count, time.Time{})
		}
		drainErr = s.drain(ctx)
	}
	elapsed := time.Since(start)
	closeErr := ep.Close()
	if err := s.report(o.provider, elapsed).print(stdout, o.json); err != nil {
		return err
	}
	return firstError(sendErr, drainErr, closeErr)
}

// runRDMServer is the server mode with --endpoint rdm: one connectionless
// endpoint receives from any number of senders until --count messages
// arrived, the context ends or the timeout passes (exit 1). With --verify
// every message is checked against the pattern of the message its first
// byte names, and the counts of all senders together must be those of
// streams that start at message 0 (testpattern.Unordered): the receiver
// cannot tell the senders apart (a provider need not name them, and the
// server never added its clients) and assumes no order.
func runRDMServer(ctx context.Context, o serverOptions, stdout, stderr io.Writer) error {
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (*domain.Manager, error) {
		return rdmDomain(o.provider, o.listen.IP, o.logger(stderr))
	})
	if err != nil {
		return err
	}
	defer done()
	s := newSink(nil, o.count)
	if o.verify {
		s.unordered = &testpattern.Unordered{Pattern: testpattern.New(o.bufSize)}
	}
	rx, err := rdm.Open(mgr, rdmLocal(o.provider, o.listen, o.addr), s.rdmConfig(o.bufSize, o.bufs, o.poll.config()))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "LISTENING %s\n", rx.Addr())
	fmt.Fprintf(stderr, "listening on %s (%s, rdm)\n", rx.Addr(), o.provider)
	stopProgress := o.progress.start(stdout, o.json, "server", "connections", s.progressCounts)
	waitErr := waitServer(ctx, s, o.timeout, func() { time.Sleep(rdmLinger) })
	stopProgress()
	closeErr := rx.Close() // the poller has stopped: s is this goroutine's now
	s.finishUnordered()
	return finishServer(s, o, stdout, waitErr, closeErr)
}

// rdmConfig returns the configuration of a connectionless endpoint whose
// receives feed the sink, with bufs receive buffers of bufSize bytes.
func (s *sink) rdmConfig(bufSize, bufs int, pc cq.Config) rdm.Config {
	return rdm.Config{
		Receive:        netio.ReceiveParams{BufferSize: bufSize, BufferCount: bufs},
		OnData:         s.onRDMData,
		OnReceiveError: s.onRDMReceiveError,
		Runtime:        cq.Runtime{PollerConfig: pc},
		ShareProcess:   shareProcess,
	}
}

// shareProcess: the rdm sweep keeps both sides of an exchange in one
// process, and closes them only after everything sent arrived
// (awaitDelivery, and closeRDMPair after a failed stream, which leaves them
// open on shm if it did not; the ping-pong's last message is answered by
// none), the close order rdm.Config.ShareProcess asks for shm. None sets
// ProgressTimeout, which shm refuses with it. Server and client modes open
// one endpoint per process, where it changes nothing.
const shareProcess = true

// onRDMData counts (and verifies, in any order) one message.
func (s *sink) onRDMData(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
	s.received(data, s.unordered != nil && s.unordered.Check(data) != nil)
}

// onRDMReceiveError counts a lost message; with verification it is also a
// verify error.
func (s *sink) onRDMReceiveError(*rdm.Endpoint, error) {
	s.receiveErrors.Add(1)
	if s.unordered != nil {
		s.verifyErrors.Add(1)
	}
	s.checkTarget()
}

// finishUnordered counts the residues whose counts no set of senders
// gives as verify errors. Call it once the poller has stopped.
func (s *sink) finishUnordered() {
	if s.unordered == nil {
		return
	}
	before := s.unordered.Errors
	_ = s.unordered.Finish()
	s.verifyErrors.Add(s.unordered.Errors - before)
}
