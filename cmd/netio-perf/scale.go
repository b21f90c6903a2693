package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/endpoint"
)

// Limits of the windows and of --mode scale.
const (
	// maxPostedReceives is the deepest queue the providers here take per
	// endpoint (tcp: 256 receives, 256 sends).
	maxPostedReceives = 256
	// maxScaleConns bounds --conns: every connection costs two endpoints,
	// their sockets and their buffers in this one process.
	maxScaleConns = 256
	// scaleInFlight is about how many messages all connections of a scale
	// run keep in flight together, so that 64 connections do not post 64
	// times the buffers of one (32 each, not 128). Much smaller windows
	// measure the senders' wake-ups more than the receiver: a sender
	// sleeps until a quarter of its window has completed.
	scaleInFlight = 2048
)

// scaleWindow returns the send window of each of conns connections: the
// sweep's window for the size, cut down to a share of scaleInFlight, at
// least 4.
func scaleWindow(size, conns int) int {
	return max(4, min(sweepWindow(size), scaleInFlight/conns))
}

// scaleRows measures every size with every connection count, one row each.
func (w *sweeper) scaleRows(ctx context.Context, sizes, conns []int) ([]sweepRow, error) {
	rows := make([]sweepRow, 0, len(sizes)*len(conns))
	for _, size := range sizes {
		for _, n := range conns {
			fmt.Fprintf(w.progress, "scale: %d connections, %s ...\n", n, formatSize(size))
			row, err := w.scale(ctx, size, n)
			if err != nil {
				return nil, fmt.Errorf("%d connections, %s: %w", n, formatSize(size), err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// scale streams messages over conns connections at once into one listener,
// one sending goroutine per connection, until the throughput budget is spent
// (each connection may send its share of the message bound), and counts what
// the listener received, timed from the start to the last receive. The send
// endpoints share one poller, as the connections of one front-end process
// would; the receive endpoints share the listener's.
func (w *sweeper) scale(ctx context.Context, size, conns int) (sweepRow, error) {
	row := sweepRow{Size: size, Connections: conns}
	window, rxBufs := w.windows(scaleWindow(size, conns))
	sk := newSink(nil, 0)
	lc := sk.listenConfig(size, rxBufs, w.poll.config())
	lc.PollerConfig.Size = max(cq.DefaultSize, 2*conns*rxBufs)
	l, err := endpoint.Listen(w.mgr, "127.0.0.1:0", lc)
	if err != nil {
		return row, err
	}
	defer l.Close()
	pc := w.poll.config()
	pc.Size = max(cq.DefaultSize, 2*conns*window)
	shared, err := cq.Open(w.mgr, pc)
	if err != nil {
		return row, err
	}
	defer shared.Close()
	senders, err := dialSenders(ctx, w, l.Addr(), size, window, conns, shared)
	defer closeSenders(senders)
	if err != nil {
		return row, err
	}
	m := startMeter()
	perConn := max(1, w.budget.messages(size)/uint64(conns))
	sent, err := runSenders(ctx, senders, perConn, m.start.Add(w.budget.throughput))
	if err != nil {
		return row, err
	}
	if err := awaitDelivery(ctx, sk, sent, 5*time.Second); err != nil {
		return row, err
	}
	row.Window, row.RxBufs = window, rxBufs
	m.stop(sk, &row)
	return row, nil
}

// dialSenders connects conns senders of window buffers each to addr, all on
// the shared poller. On error it returns those connected so far.
func dialSenders(ctx context.Context, w *sweeper, addr string, size, window, conns int, shared *cq.Poller) ([]*sender, error) {
	senders := make([]*sender, 0, conns)
	for range conns {
		s := newSender(size, nil)
		cfg := s.config(window, w.poll.config())
		cfg.Poller = shared
		ep, err := endpoint.Dial(ctx, w.mgr, addr, cfg)
		if err != nil {
			return senders, err
		}
		s.ep = ep
		senders = append(senders, s)
	}
	return senders, nil
}

// closeSenders closes the senders' endpoints.
func closeSenders(senders []*sender) {
	for _, s := range senders {
		_ = s.ep.Close()
	}
}

// runSenders runs every sender in a goroutine of its own until it has sent
// count messages or the deadline passed, and waits for every completion. It
// returns how many messages were sent in all, and the errors.
func runSenders(ctx context.Context, senders []*sender, count uint64, deadline time.Time) (uint64, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(senders))
	for i, s := range senders {
		wg.Go(func() {
			_, err := s.run(ctx, count, deadline)
			if err == nil {
				err = s.drain(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var total uint64
	for _, s := range senders {
		total += s.sent.Load()
	}
	return total, errors.Join(errs...)
}
