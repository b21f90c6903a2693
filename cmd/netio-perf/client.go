package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/testpattern"
)

const clientSynopsis = "netio-perf client [--endpoint msg|rdm] [--inject] [--provider P] --connect IP:PORT|NAME [--size S] [--count N] [--bufs N] [--verify] [--zero-copy] [--coalesce [--buf-size B] [--flush-interval D]] [--json] [--timeout D] [--local IP] [--progress auto|on|off]"

// defaultTimeout bounds a client run and a server run with --count.
const defaultTimeout = 120 * time.Second

// clientOptions are the client's flags.
type clientOptions struct {
	commonFlags
	endpointFlags
	connect  hostPort
	local    string
	peer     peerFlags // --mode, --window, --iterations (pingpong2p.go)
	size     int
	count    uint64
	bufs     int
	verify   bool
	zeroCopy bool
	coalesce bool          // send with SendMessage through coalescing buffers
	coal     coalesceFlags // their size and flush interval
	timeout  time.Duration // 0: none
	progress progressFlags // progress lines (progress.go)
}

// parseClientFlags parses the client's command line.
func parseClientFlags(args []string, stderr io.Writer) (clientOptions, error) {
	// The window matches the server's default posted buffers: on sockets
	// (libfabric 1.17) more messages in flight than the receiver has posted
	// take the provider's buffered-receive path, which livelocks under load.
	o := clientOptions{size: 4096, count: 100000, bufs: 64}
	fs := newCmdLine("client", clientSynopsis, stderr)
	o.register(fs.FlagSet)
	connect := fs.String("connect", "", "server address, IP:PORT (required)")
	o.peer.register(fs.FlagSet, &o.bufs, &o.count)
	fs.StringVar(&o.local, "local", "", "local IP address to open the domain on (default: 127.0.0.1 for a loopback server, else the address routed to it)")
	fs.Var(sizeFlag{&o.size}, "size", "message size in bytes, e.g. 4096 or 64K")
	fs.Uint64Var(&o.count, "count", o.count, "messages to send")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "send buffers: the most messages in flight")
	fs.BoolVar(&o.verify, "verify", false, "fill byte i of message k with (k+i)%251")
	fs.BoolVar(&o.zeroCopy, "zero-copy", false, "send from the client's own memory (a declared region) instead of copying into send buffers")
	fs.BoolVar(&o.coalesce, "coalesce", false, "pack messages into coalescing buffers with SendMessage (netio3's format; the server needs --coalesce): --size defaults to 64, --bufs counts coalescing buffers, and with --verify message k has tag k")
	o.coal.register(fs, "with --coalesce")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long (0: none)")
	o.progress.register(fs)
	o.registerEndpoint(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return o, err
	}
	if err := o.progress.check(o.json); err != nil {
		return o, fs.fail(err)
	}
	parseIP, err := o.endpointFlags.check(fs, &o.commonFlags, "connect", *connect, false)
	if err != nil {
		return o, fs.fail(err)
	}
	if parseIP && *connect == "" {
		return o, fs.fail(errors.New("--connect is required"))
	}
	if parseIP {
		if o.connect, err = parseHostPort(*connect, false); err != nil {
			return o, fs.fail(fmt.Errorf("--connect: %w", err))
		}
	}
	if o.rdm() && (o.zeroCopy || o.coalesce || o.peer.mode == modePingPong) {
		return o, fs.fail(errors.New("--zero-copy, --coalesce and --mode pingpong need --endpoint msg"))
	}
	if o.local != "" && net.ParseIP(o.local) == nil {
		return o, fs.fail(fmt.Errorf("--local: %q is not an IP address", o.local))
	}
	if o.bufs < 1 {
		return o, fs.fail(errors.New("--bufs must be at least 1"))
	}
	if o.timeout < 0 {
		return o, fs.fail(errors.New("--timeout must not be negative"))
	}
	if err := o.peer.check(o.count); err != nil {
		return o, fs.fail(err)
	}
	if o.peer.mode == modePingPong && (o.verify || o.zeroCopy || o.coalesce) {
		return o, fs.fail(errors.New("--mode pingpong takes no --verify, --zero-copy or --coalesce"))
	}
	if o.inject && !o.rdm() && (o.zeroCopy || o.coalesce || o.peer.mode == modePingPong) {
		return o, fs.fail(errors.New("--inject with --endpoint msg needs buffered sends: no --zero-copy, --coalesce or --mode pingpong"))
	}
	if o.coalesce && o.zeroCopy {
		return o, fs.fail(errors.New("--zero-copy and --coalesce exclude each other"))
	}
	if o.coalesce && !fs.isSet("size") {
		o.size = defaultCoalesceSizes[0]
	}
	if err := o.coal.check(fs, o.coalesce, "--coalesce", o.size); err != nil {
		return o, fs.fail(err)
	}
	return o, nil
}

// localFor returns the local address to reach the server from: 127.0.0.1
// for a loopback server, else the source address the kernel routes to it
// by (a UDP "connect" sends nothing).
func localFor(server hostPort) (string, error) {
	if ip := net.ParseIP(server.IP); ip.IsLoopback() {
		return ip.String(), nil
	}
	c, err := net.Dial("udp", server.String())
	if err != nil {
		return "", fmt.Errorf("no local address routes to %s: %w", server, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// openDomain opens the client's domain, at --local or else at the local
// address that reaches the server, and returns that address too ("" for
// a provider of named addresses).
func (o clientOptions) openDomain(stderr io.Writer) (*domain.Manager, string, error) {
	local := o.local
	if local == "" && o.addr == "" {
		var err error
		if local, err = localFor(o.connect); err != nil {
			return nil, "", err
		}
	}
	var mgr *domain.Manager
	var err error
	if o.rdm() {
		mgr, err = rdmDomain(o.provider, local, o.logger(stderr))
	} else {
		mgr, err = domain.Open(domain.Config{Provider: o.provider, Address: local, Logger: o.logger(stderr)})
	}
	return mgr, local, err
}

// runClient is the client mode: it sends --count messages, waits for every
// completion and closes.
func runClient(ctx context.Context, o clientOptions, stdout, stderr io.Writer) error {
	if o.peer.mode == modePingPong {
		return runPingPongClient(ctx, o, stdout, stderr)
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	var local string
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (mgr *domain.Manager, err error) {
		mgr, local, err = o.openDomain(stderr)
		return mgr, err
	})
	if err != nil {
		return err
	}
	defer done()
	var pat *testpattern.Pattern
	if o.verify {
		pat = testpattern.New(o.size)
	}
	s := newSender(o.size, pat)
	s.inject = o.inject
	if o.rdm() {
		return runRDMClient(ctx, o, mgr, local, s, stdout)
	}
	var closeEndpoint func() error
	if o.coalesce {
		closeEndpoint, err = s.dialCoalescing(ctx, mgr, o.connect.String(), o.coal, o.bufs, o.poll.config())
	} else {
		closeEndpoint, err = s.dial(ctx, mgr, o.connect.String(), o.bufs, o.poll.config(), o.zeroCopy)
	}
	if err != nil {
		return err
	}
	read := s.progressCounts
	if o.coalesce {
		read = s.coalescedProgressCounts
	}
	stopProgress := o.progress.start(stdout, o.json, "client", "in flight", read)
	defer stopProgress()
	var sendErr, drainErr error
	start := time.Now()
	if o.coalesce {
		_, sendErr = s.sendMessages(ctx, o.count, time.Time{})
		drainErr = s.flushMessages(ctx)
	} else {
		_, sendErr = s.run(ctx, o.count, time.Time{})
		drainErr = s.drain(ctx)
	}
	elapsed := time.Since(start)
	stopProgress()
	s.lingerIfStaged(ctx, o.provider)
	closeErr := closeEndpoint()
	r := s.report(o.provider, elapsed)
	if o.coalesce {
		r = s.coalescedReport(o.provider, elapsed)
	}
	if err := r.print(stdout, o.json); err != nil {
		return err
	}
	return firstError(sendErr, drainErr, closeErr)
}

// report summarises what the sender did: messages and bytes are the sends
// that completed successfully.
func (s *sender) report(provider string, elapsed time.Duration) report {
	r := report{
		Role: "client", Provider: provider, Size: s.size,
		Messages: s.completed.Load(), Bytes: s.completed.Load() * uint64(s.size),
		Verify: s.pat != nil, FailedSends: s.failed.Load(),
	}
	r.setRates(elapsed)
	return r
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
