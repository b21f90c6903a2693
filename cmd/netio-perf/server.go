package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

const serverSynopsis = "netio-perf server [--endpoint msg|rdm] [--provider P] [--listen IP:PORT|NAME] [--buf-size B] [--bufs N] [--count N] [--verify] [--coalesce] [--json] [--timeout D] [--progress auto|on|off]"

// closeGrace is how long a server that received its --count messages waits
// for the clients to close their connections before it closes them itself:
// closing first could cancel sends whose completions the clients have not
// read yet.
const closeGrace = time.Second

// serverOptions are the server's flags.
type serverOptions struct {
	commonFlags
	endpointFlags
	listen   hostPort
	peer     peerFlags // --mode, --window, --iterations (pingpong2p.go)
	bufSize  int
	bufs     int
	count    uint64
	verify   bool
	coalesce bool          // decode coalesced buffers into messages (OnMessage)
	timeout  time.Duration // 0: none
	progress progressFlags // progress lines (progress.go)
}

// parseServerFlags parses the server's command line.
func parseServerFlags(args []string, stderr io.Writer) (serverOptions, error) {
	o := serverOptions{bufSize: mib, bufs: 64}
	fs := newCmdLine("server", serverSynopsis, stderr)
	o.register(fs.FlagSet)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on, IP:PORT (port 0 picks a free port)")
	o.peer.register(fs.FlagSet, &o.bufs, &o.count)
	fs.Var(sizeFlag{&o.bufSize}, "buf-size", "size of each receive buffer: the largest message")
	fs.IntVar(&o.bufs, "bufs", o.bufs, "receive buffers kept posted per connection")
	fs.Uint64Var(&o.count, "count", 0, "exit after this many messages over all connections (0: run until SIGINT/SIGTERM)")
	fs.BoolVar(&o.verify, "verify", false, "check that byte i of message k of each connection is (k+i)%251 (and with --coalesce that its tag is k)")
	fs.BoolVar(&o.coalesce, "coalesce", false, "decode each buffer received as coalesced messages (from client --coalesce) and count those; --buf-size must hold the client's coalescing buffers")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up with exit status 1 after this long; 0: never (without --count the default is never)")
	o.progress.register(fs)
	o.registerEndpoint(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return o, err
	}
	if err := o.progress.check(o.json); err != nil {
		return o, fs.fail(err)
	}
	parseIP, err := o.endpointFlags.check(fs, &o.commonFlags, "listen", *listen, true)
	if err != nil {
		return o, fs.fail(err)
	}
	if parseIP {
		if o.listen, err = parseHostPort(*listen, true); err != nil {
			return o, fs.fail(fmt.Errorf("--listen: %w", err))
		}
	}
	if o.rdm() && (o.coalesce || o.peer.mode == modePingPong) {
		return o, fs.fail(errors.New("--coalesce and --mode pingpong need --endpoint msg"))
	}
	if o.bufs < 1 {
		return o, fs.fail(errors.New("--bufs must be at least 1"))
	}
	if o.timeout < 0 {
		return o, fs.fail(errors.New("--timeout must not be negative"))
	}
	if o.count == 0 && !fs.isSet("timeout") {
		o.timeout = 0 // a server without --count runs until a signal
	}
	if o.peer.mode == modePingPong && (o.verify || o.coalesce || fs.isSet("count") || fs.isSet("iterations")) {
		return o, fs.fail(errors.New("--mode pingpong takes no --verify, --coalesce or --count (the client sets the round trips)"))
	}
	return o, nil
}

// runServer is the server mode: it receives until --count messages arrived,
// the context ends (a signal: a clean exit) or the timeout passes (exit 1).
func runServer(ctx context.Context, o serverOptions, stdout, stderr io.Writer) error {
	if o.rdm() {
		return runRDMServer(ctx, o, stdout, stderr)
	}
	if o.peer.mode == modePingPong {
		return runPingPongServer(ctx, o, stdout, stderr)
	}
	mgr, done, err := openServed(o.metricsAddr, stderr, func() (*domain.Manager, error) {
		return domain.Open(domain.Config{Provider: o.provider, Address: o.listen.IP, Logger: o.logger(stderr)})
	})
	if err != nil {
		return err
	}
	defer done()
	var pat *testpattern.Pattern
	if o.verify {
		pat = testpattern.New(o.bufSize)
	}
	s := newSink(pat, o.count)
	lc := s.listenConfig(o.bufSize, o.bufs, o.poll.config())
	if o.coalesce {
		lc.OnData, lc.OnMessage = nil, s.onMessage
	}
	l, err := endpoint.Listen(mgr, o.listen.String(), lc)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "LISTENING %s\n", l.Addr())
	fmt.Fprintf(stderr, "listening on %s\n", l.Addr())
	stopProgress := o.progress.start(stdout, o.json, "server", "connections", s.progressCounts)
	waitErr := waitServer(ctx, s, o.timeout, func() { waitPeersClosed(s, closeGrace) })
	stopProgress()
	return finishServer(s, o, stdout, waitErr, l.Close())
}

// finishServer prints the server's report and returns the first of the
// wait's error, the close's and the verification's.
func finishServer(s *sink, o serverOptions, stdout io.Writer, waitErr, closeErr error) error {
	r := s.report(o.provider)
	if err := r.print(stdout, o.json); err != nil {
		return err
	}
	switch {
	case waitErr != nil:
		return waitErr
	case closeErr != nil:
		return closeErr
	case r.VerifyErrors > 0:
		return fmt.Errorf("%d messages failed verification", r.VerifyErrors)
	}
	return nil
}

// waitServer waits until the sink reached its target (then runs linger:
// the wait for the peers to be done) or the context ends; it fails when
// the timeout (0: none) passes first.
func waitServer(ctx context.Context, s *sink, timeout time.Duration, linger func()) error {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-s.reached:
		linger()
		return nil
	case <-ctx.Done():
		return nil
	case <-expired:
		return fmt.Errorf("timeout after %v: received %d messages (--count %d)", timeout, s.messages.Load(), s.target)
	}
}

// waitPeersClosed waits until no connection is open, or grace passed.
func waitPeersClosed(s *sink, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for s.open.Load() > 0 {
		select {
		case <-s.closed:
		case <-deadline.C:
			return
		}
	}
}
