package storm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/tests/storm/leakcheck"
	"github.com/netio-go/netio/tests/storm/traffic"
)

// Shape of the concurrent-streams storm.
const (
	streamConns    = 64
	streamMaxSize  = 2048
	streamRecvBufs = 16
	streamSendBufs = 8 // at most streamRecvBufs: see traffic.Sender.Params
)

// streamMessages returns how many messages each connection sends.
func streamMessages() int {
	if testing.Short() {
		return 50
	}
	return 300
}

// TestConcurrentStreams connects 64 senders to one listener, each with its
// own poller, lets them all stream at once, and checks every message of
// every stream (order, length, content, no stream on another's connection)
// and that the process holds what it held before.
func TestConcurrentStreams(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			perConn := streamMessages()
			mgr := openDomain(t, prov)
			// Stream streamConns is the warm-up connection: its messages
			// are checked like the others'.
			check := traffic.NewChecker(streamConns+1, streamMaxSize)
			l := traffic.Listen(t, mgr, endpoint.ListenConfig{
				Params: netio.ReceiveParams{BufferSize: streamMaxSize, BufferCount: streamRecvBufs},
				OnData: check.OnData,
			})
			ctx, cancel := context.WithTimeout(t.Context(), 2*waitTimeout)
			defer cancel()
			sender := func(stream int) traffic.Sender {
				return traffic.Sender{Stream: uint32(stream), Count: perConn,
					Params: netio.BufferedSendParams{BufferSize: streamMaxSize, BufferCount: streamSendBufs}}
			}

			warm, err := sender(streamConns).Run(ctx, mgr, l.Addr())
			require.NoError(t, err, "warm-up stream")
			require.Equal(t, perConn, warm.Completed)
			l.WaitQuiet(t, waitTimeout)
			before := leakcheck.Steady(mgr)

			// Every sender connects, then waits for all others: the
			// snapshot in between sees 64 connections open at once.
			var connected, start sync.WaitGroup
			connected.Add(streamConns)
			start.Add(1)
			results := make([]traffic.Result, streamConns)
			errs := make([]error, streamConns)
			var senders sync.WaitGroup
			began := time.Now()
			for i := range streamConns {
				var once sync.Once
				arrived := func() { once.Do(connected.Done) }
				s := sender(i)
				s.Connected = func() { arrived(); start.Wait() }
				senders.Go(func() {
					results[i], errs[i] = s.Run(ctx, mgr, l.Addr())
					arrived() // a failed dial never calls Connected
				})
			}
			connected.Wait()
			peak := leakcheck.Take(mgr)
			start.Done()
			senders.Wait()
			took := time.Since(began)

			for i, err := range errs {
				require.NoError(t, err, "stream %d", i)
				assert.Equal(t, traffic.Result{Sent: perConn, Completed: perConn}, results[i], "stream %d", i)
			}
			assertAllDelivered(t, mgr, l, check, perConn)
			l.WaitQuiet(t, waitTimeout)
			rep := check.Report()
			t.Logf("%s: %d connections × %d messages (≤ %d B) in %v; %d delivered intact", prov, streamConns, perConn,
				streamMaxSize, took.Round(time.Millisecond), rep.Total)
			t.Logf("%s: with %d connections open: %v", prov, streamConns, peak)
			assert.Zero(t, rep.Problems, "damaged or misplaced messages: %v", rep.Errors)
			assert.Empty(t, rep.Short(perConn), "streams with messages missing (stream: delivered)")
			assert.Equal(t, streamConns+1, rep.Connections, "stream connections")
			assert.Zero(t, rep.Foreign, "connections that carried no stream")
			assert.Equal(t, (streamConns+1)*perConn, rep.Total, "messages delivered")
			assert.Zero(t, l.Unexpected.Load(), "connections that ended with an error")
			// Both ends of 64 connections: a send pool and a receive
			// region each.
			assert.GreaterOrEqual(t, peak.Registrations, before.Registrations+2*streamConns, "registrations at the peak")
			assert.Greater(t, peak.FDs, before.FDs+streamConns, "file descriptors at the peak")
			assert.Greater(t, peak.Goroutines, before.Goroutines+streamConns, "goroutines at the peak")
			leakcheck.AssertBack(t, mgr, before, prov+" after 64 concurrent streams")
		})
	}
}
