package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// Sweep modes: message sends (the default), RMA reads or writes of a region
// the other side exposed, or sends over many connections at once.
const (
	modeSend     = "send"
	modeRMARead  = "rma-read"
	modeRMAWrite = "rma-write"
	modeScale    = "scale" // send throughput of many connections into one receiver
)

// rmaPair is an RMA initiator connected to a listener that exposed a
// window of size-byte slots, and a local registered window of the same
// shape.
type rmaPair struct {
	l      *endpoint.Listener
	target *endpoint.ExposedRegion
	remote endpoint.RemoteRegion
	local  *domain.Registration
	ep     *endpoint.RMAEndpoint
}

// openRMAPair sets up the pair. The descriptor goes through its wire form,
// as it would between processes.
func (w *sweeper) openRMAPair(ctx context.Context, size, window int, write bool) (*rmaPair, error) {
	p := &rmaPair{}
	remoteAccess, localAccess := domain.AccessRemoteRead, domain.AccessRead
	if write {
		remoteAccess, localAccess = domain.AccessRemoteWrite, domain.AccessWrite
	}
	var err error
	if p.l, err = endpoint.Listen(w.mgr, "127.0.0.1:0", newSink(nil, 0).listenConfig(64, 4, w.poll.config())); err != nil {
		return nil, err
	}
	if p.target, err = endpoint.AllocExposed(w.mgr, size*window, remoteAccess); err != nil {
		p.close()
		return nil, err
	}
	wire, err := p.target.Descriptor().MarshalBinary()
	if err == nil {
		err = p.remote.UnmarshalBinary(wire)
	}
	if err == nil {
		p.local, err = w.mgr.AllocRegistered(size*window, localAccess)
	}
	if err == nil {
		p.ep, err = endpoint.DialRMA(ctx, w.mgr, p.l.Addr(), endpoint.RMAConfig{Runtime: cq.Runtime{PollerConfig: w.poll.config()}})
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *rmaPair) close() {
	if p.ep != nil {
		_ = p.ep.Close()
	}
	if p.local != nil {
		_ = p.local.Close()
	}
	if p.target != nil {
		_ = p.target.Close()
	}
	_ = p.l.Close()
}

// start posts one transfer of slot's bytes.
func (p *rmaPair) start(write bool, slot, size int) (*endpoint.RMAOp, error) {
	off := slot * size
	if write {
		return p.ep.PushAsync(p.local, off, p.remote, uint64(off), size)
	}
	return p.ep.PullAsync(p.local, off, p.remote, uint64(off), size)
}

// measureRMA measures RMA throughput with a window of transfers in flight,
// then the time of one transfer at a time (the latency columns: the whole
// operation, not halved).
func (w *sweeper) measureRMA(ctx context.Context, size int, write bool) (sweepRow, error) {
	row := sweepRow{Size: size}
	window, _ := w.windows(sweepWindow(size))
	p, err := w.openRMAPair(ctx, size, window, write)
	if err != nil {
		return row, err
	}
	defer p.close()
	fmt.Fprintf(w.progress, "sweep: %s %s throughput ...\n", formatSize(size), w.mode)
	if err := w.rmaThroughput(ctx, p, size, window, write, &row); err != nil {
		return row, fmt.Errorf("throughput: %w", err)
	}
	fmt.Fprintf(w.progress, "sweep: %s %s latency ...\n", formatSize(size), w.mode)
	if err := w.rmaLatency(ctx, p, size, write, &row); err != nil {
		return row, fmt.Errorf("latency: %w", err)
	}
	return row, nil
}

func (w *sweeper) rmaThroughput(ctx context.Context, p *rmaPair, size, window int, write bool, row *sweepRow) error {
	inFlight := make([]*endpoint.RMAOp, window)
	limit := w.budget.messages(size)
	cpu0 := cpuTime()
	start := time.Now()
	deadline := start.Add(w.budget.throughput)
	var done uint64
	for n := uint64(0); n < limit && time.Now().Before(deadline); n++ {
		slot := int(n % uint64(window))
		if op := inFlight[slot]; op != nil { // the slot's previous transfer must be done
			if _, err := op.Wait(ctx); err != nil {
				return err
			}
			done++
		}
		op, err := p.start(write, slot, size)
		if err != nil {
			return err
		}
		inFlight[slot] = op
	}
	for _, op := range inFlight {
		if op == nil {
			continue
		}
		if _, err := op.Wait(ctx); err != nil {
			return err
		}
		done++
	}
	elapsed := time.Since(start)
	row.Messages, row.Bytes, row.Seconds = done, done*uint64(size), elapsed.Seconds()
	row.MBPerS, row.MsgsPerS = rates(row.Messages, row.Bytes, elapsed)
	row.Window = window
	row.setCPU(cpuTime() - cpu0)
	return nil
}

// rmaLatency times one transfer at a time of slot 0 until the ping-pong
// budget is spent.
func (w *sweeper) rmaLatency(ctx context.Context, p *rmaPair, size int, write bool, row *sweepRow) error {
	var times []time.Duration
	deadline := time.Now().Add(w.budget.pingPong)
	for time.Now().Before(deadline) {
		t0 := time.Now()
		op, err := p.start(write, 0, size)
		if err != nil {
			return err
		}
		if _, err := op.Wait(ctx); err != nil {
			return err
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	row.RoundTrips = len(times)
	row.LatP50us, row.LatP99us = percentileMicros(times, 0.50), percentileMicros(times, 0.99)
	return nil
}

// percentile returns the p-quantile (0..1) of sorted durations in µs.
func percentileMicros(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	return float64(d[min(len(d)-1, int(p*float64(len(d))))].Nanoseconds()) / 1e3
}
