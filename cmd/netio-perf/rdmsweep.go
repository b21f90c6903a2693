package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/rdm"
	"github.com/netio-go/netio/sendbuf"
)

// openSweepDomain opens the sweep's domain: for connected endpoints at
// 127.0.0.1, for --endpoint rdm one of connectionless endpoints.
func openSweepDomain(o sweepOptions, stderr io.Writer) (*domain.Manager, error) {
	if o.rdm() {
		return rdmDomain(o.provider, "127.0.0.1", o.logger(stderr))
	}
	return domain.Open(domain.Config{Provider: o.provider, Address: "127.0.0.1", Logger: o.logger(stderr)})
}

// sweepLocal is where the sweep's rdm endpoints bind: a free port at
// 127.0.0.1, or a name the provider makes (shm).
func (w *sweeper) sweepLocal() string {
	return rdmLocal(w.mgr.Provider(), hostPort{IP: "127.0.0.1"}, "")
}

// throughputRDM is throughput over two connectionless endpoints of the
// domain: the sender streams to the receiver as its one peer. Both share
// the domain's poller (package rdm), so it measures one poller doing both
// sides, as one process of a readout farm would.
func (w *sweeper) throughputRDM(ctx context.Context, size int, row *sweepRow) error {
	window, rxBufs := w.windows(sweepWindow(size))
	sk := newSink(nil, 0)
	rx, err := rdm.Open(w.mgr, w.sweepLocal(), sk.rdmConfig(size, rxBufs, w.poll.config()))
	if err != nil {
		return err
	}
	s := newSender(size, nil)
	tx, err := s.openRDM(w.mgr, w.sweepLocal(), rx.Addr(), window, cq.Runtime{PollerConfig: w.poll.config()})
	if err != nil {
		_ = rx.Close() // nothing was sent to it
		return err
	}
	err = w.stream(ctx, s, sk, size, window, rxBufs, row)
	settle := func() error {
		return awaitDelivery(context.WithoutCancel(ctx), sk, s.sent.Load(), rdmSettleLimit)
	}
	return closeRDMPair(err, quirks.For(w.mgr.Provider()).RegionsSharedInProcess, settle, tx, rx)
}

// rdmSettleLimit bounds how long closeRDMPair waits for the receiver after
// a failed stream.
const rdmSettleLimit = 5 * time.Second

// closeRDMPair closes the sweep's two rdm endpoints of one exchange, first
// then second, after it ended with err, keeping rdm.Config.ShareProcess's
// promise: close an endpoint only once the other has received all it sent.
// On success the exchange waited for that (awaitDelivery; the ping-pong's
// last echo is answered by none). After an error (a cancel, a failed run
// or drain, messages late) settle stops the sending and waits a bounded
// time for everything handed over to arrive. If that fails on a provider
// whose endpoints share regions in the process (shm), closing either could
// crash the process (SIGSEGV inside libfabric,
// rdm.ErrOneEndpointPerProcess): it returns the error and leaves both
// open. The sweep then stops, its domain's close is refused while their
// registrations live, and the process exits, which unmaps the regions with
// nothing left to touch them.
func closeRDMPair(err error, sharedRegions bool, settle func() error, first, second io.Closer) error {
	if err != nil {
		if serr := settle(); serr != nil && sharedRegions {
			return fmt.Errorf("%w (both endpoints left open: closing them now could crash the process: %v)", err, serr)
		}
	}
	_ = first.Close()
	_ = second.Close() // the first sends it nothing more
	return err
}

// latencyRDM bounces one message between two connectionless endpoints,
// each the other's peer: the client's in the sweep's domain, the server's
// in a second domain of this process, so that each side has a poller (a
// thread) of its own and every message crosses threads, as in the
// connected sweep's ping-pong and the C baseline's. (The endpoints of one
// domain share one poller, and a ping-pong between two of them never
// leaves its goroutine.)
func (w *sweeper) latencyRDM(ctx context.Context, size int, row *sweepRow) error {
	serverMgr, err := rdmDomain(w.mgr.Provider(), "127.0.0.1", w.mgr.Logger(zerolog.Logger{}))
	if err != nil {
		return err
	}
	defer serverMgr.Close() // last
	clientPoller, err := cq.Open(w.mgr, w.poll.config())
	if err != nil {
		return err
	}
	defer clientPoller.Close() // after the endpoints
	serverPoller, err := cq.Open(serverMgr, w.poll.config())
	if err != nil {
		return err
	}
	defer serverPoller.Close()
	p := newPingPong(size, w.budget)
	client, err := rdm.Open(w.mgr, w.sweepLocal(), pingPongConfig(size, clientPoller, p.onPong))
	if err != nil {
		return err
	}
	server, err := rdm.Open(serverMgr, w.sweepLocal(), pingPongConfig(size, serverPoller, p.onPing))
	if err != nil {
		_ = client.Close() // nothing was sent
		return err
	}
	err = pingPongRDM(ctx, p, client, server, clientPoller, row)
	settle := func() error { return p.quiesce(clientPoller, rdmSettleLimit) }
	// The server first: once the last echo arrived it has nothing on its way.
	return closeRDMPair(err, quirks.For(w.mgr.Provider()).RegionsSharedInProcess, settle, server, client)
}

// pingPongRDM connects client and server both ways and runs the ping-pong.
func pingPongRDM(ctx context.Context, p *pingPong, client, server *rdm.Endpoint, clientPoller *cq.Poller, row *sweepRow) error {
	ping, err := connectRDM(ctx, client, server.Addr())
	if err != nil {
		return err
	}
	pong, err := connectRDM(ctx, server, client.Addr())
	if err != nil {
		return err
	}
	p.setLinks(ping, pong)
	return p.run(ctx, clientPoller, row)
}

// quiesce stops a ping-pong that ended with an error from sending more
// pings, and waits up to limit for the echo of the last ping sent, if one
// is on its way: then no message is. (An echo that failed never comes.)
// It reads the client's side on its poller goroutine.
func (p *pingPong) quiesce(client *cq.Poller, limit time.Duration) error {
	do := poll.Of(client).Do
	var onItsWay bool
	do(func() { onItsWay = !p.base.IsZero() && !p.over; p.over = true })
	for deadline := time.Now().Add(limit); onItsWay; {
		var late int
		do(func() { late = p.late })
		if late > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the last ping's echo did not arrive within %v", limit)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// pingPongConfig configures one side of the rdm ping-pong on poller; on
// gets every message but the empty ones of connectRDM, which are not pings.
func pingPongConfig(size int, poller *cq.Poller, on func(*endpoint.ReceiveEndpoint, []byte)) rdm.Config {
	return rdm.Config{
		Send:    netio.BufferedSendParams{BufferSize: size, BufferCount: pingPongBufs},
		Receive: netio.ReceiveParams{BufferSize: size, BufferCount: pingPongBufs},
		OnData: func(_ *rdm.Endpoint, _ rdm.Peer, d []byte) {
			if len(d) > 0 {
				on(nil, d)
			}
		},
		Runtime:      cq.Runtime{Poller: poller},
		ShareProcess: shareProcess,
	}
}

// connectRDM adds the peer at addr to ep and sends it one empty message,
// retrying while the provider connects (ofi_rxm returns NoResources until
// it has), so that timed messages do not wait for the connection. The
// peer's OnData sees the empty message; the ping-pong ignores it, as it
// starts only after both directions are up.
func connectRDM(ctx context.Context, ep *rdm.Endpoint, addr string) (rdmPeer, error) {
	peer, err := ep.AddPeer(addr)
	if err != nil {
		return rdmPeer{}, err
	}
	to := rdmPeer{ep: ep, peer: peer}
	var buf *sendbuf.NetworkBuffer
	for buf = ep.GetBuffer(); buf == nil; buf = ep.GetBuffer() {
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return to, err
		}
	}
	for st := to.SendBuffer(buf, 0); st != netio.OK; st = to.SendBuffer(buf, 0) {
		err := st.Err()
		if st == netio.NoResources {
			err = sleepCtx(ctx, time.Millisecond)
		}
		if err != nil {
			ep.ReleaseBuffer(buf.ID())
			return to, err
		}
	}
	return to, nil
}

// sleepCtx sleeps for d, or until ctx ends (its cause).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
