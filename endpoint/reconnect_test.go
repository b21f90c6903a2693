package endpoint_test

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/sendbuf"
)

// reports records every key a ReconnectingSender reports.
type reports struct {
	mu       sync.Mutex
	statuses map[uint64][]netio.Status
}

func (r *reports) record(key uint64, st netio.Status) {
	r.mu.Lock()
	r.statuses[key] = append(r.statuses[key], st)
	r.mu.Unlock()
}

func (r *reports) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.statuses)
}

// assertOnce checks that keys 1..n were each reported exactly once and
// returns how many were reported with each status.
func (r *reports) assertOnce(t *testing.T, n uint64) map[netio.Status]int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	byStatus := map[netio.Status]int{}
	for k := uint64(1); k <= n; k++ {
		if assert.Len(t, r.statuses[k], 1, "key %d", k) {
			byStatus[r.statuses[k][0]]++
		}
	}
	assert.Len(t, r.statuses, int(n), "keys reported beyond those handed over")
	return byStatus
}

func seqMessage(seq uint64) []byte {
	msg := make([]byte, 256)
	binary.LittleEndian.PutUint64(msg, seq)
	return msg
}

// sendAll hands messages first..last over, retrying while the sender is
// full, and returns the keys in order.
func sendAll(t *testing.T, rs *endpoint.ReconnectingSender, first, last uint64) []uint64 {
	t.Helper()
	var keys []uint64
	deadline := time.Now().Add(20 * time.Second)
	for seq := first; seq <= last; {
		key, st := rs.Send(seqMessage(seq))
		switch st {
		case netio.OK:
			keys = append(keys, key)
			seq++
		case netio.NoResources:
			require.True(t, time.Now().Before(deadline), "sender stayed full")
			time.Sleep(100 * time.Microsecond)
		default:
			require.Failf(t, "send", "message %d: %v", seq, st)
		}
	}
	return keys
}

// dialRestartable dials a ReconnectingSender with send that records its
// reports and connection changes, waits for its first connection, and
// closes it at the end of the test.
func dialRestartable(t *testing.T, mgr *domain.Manager, addr string, send endpoint.SendConfig) (*endpoint.ReconnectingSender, *reports, chan bool) {
	t.Helper()
	rep := &reports{statuses: map[uint64][]netio.Status{}}
	changes := make(chan bool, 16)
	rs, err := endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{
		Send:               send,
		InitialBackoff:     2 * time.Millisecond,
		MaxBackoff:         20 * time.Millisecond,
		DialTimeout:        time.Second, // a dial racing the old listener's close waits this long
		OnSendCompleted:    rep.record,
		OnConnectionChange: func(up bool, _ error) { changes <- up },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rs.Close()) })
	require.True(t, <-changes, "first connection")
	return rs, rep, changes
}

func TestReconnectingSenderSurvivesServerRestart(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			l1, err := endpoint.Listen(mgr, "127.0.0.1:0", rcv.config(netio.ReceiveParams{BufferSize: 4096, BufferCount: 32}))
			require.NoError(t, err)
			addr := l1.Addr()
			defer l1.Close()

			rs, rep, changes := dialRestartable(t, mgr, addr,
				endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16}})

			sendAll(t, rs, 1, 300)
			waitFor(t, 10*time.Second, func() bool { return rep.count() == 300 && rcv.count.Load() == 300 }, "first 300 messages")
			require.NoError(t, l1.Close())
			require.False(t, <-changes, "connection ends with the server")

			// While the server is down, the backlog (16 messages) takes
			// what it can and then says so.
			sendAll(t, rs, 301, 316)
			_, st := rs.Send(seqMessage(317))
			assert.Equal(t, netio.NoResources, st, "a full backlog refuses")
			assert.Equal(t, 16, rs.Stats().Backlog)

			rcv2 := newReceiver()
			l2, err := endpoint.Listen(mgr, addr, rcv2.config(netio.ReceiveParams{BufferSize: 4096, BufferCount: 32}))
			require.NoError(t, err)
			defer func() { assert.NoError(t, l2.Close()) }()
			require.True(t, <-changes, "reconnected")
			sendAll(t, rs, 317, 400)
			waitFor(t, 10*time.Second, func() bool { return rep.count() == 400 && rcv2.count.Load() == 100 }, "messages after the restart")

			byStatus := rep.assertOnce(t, 400)
			assert.Equal(t, 400, byStatus[netio.OK], "every message completed: none was in flight at the restart")
			rcv2.mu.Lock()
			for i, msg := range rcv2.messages {
				assert.Equal(t, uint64(301+i), binary.LittleEndian.Uint64(msg), "backlog first, in order")
			}
			rcv2.mu.Unlock()
			s := rs.Stats()
			assert.Equal(t, uint64(400), s.HandedOver)
			assert.Equal(t, uint64(2), s.Connections)
		})
	}
}

func TestReconnectingSenderReportsBacklogAtClose(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", newReceiver().config(netio.ReceiveParams{}))
	require.NoError(t, err)
	addr := l.Addr()
	require.NoError(t, l.Close()) // nothing listens there any more

	rep := &reports{statuses: map[uint64][]netio.Status{}}
	rs, err := endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{
		Send:            endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 512, BufferCount: 4}},
		InitialBackoff:  time.Millisecond,
		MaxBackoff:      4 * time.Millisecond,
		OnSendCompleted: rep.record,
	})
	require.NoError(t, err)
	keys := sendAll(t, rs, 1, 4)
	assert.Equal(t, []uint64{1, 2, 3, 4}, keys)
	waitFor(t, 5*time.Second, func() bool { return rs.Stats().DialErrors >= 2 }, "dials retried")
	assert.False(t, rs.Connected())

	require.NoError(t, rs.Close())
	assert.NoError(t, rs.Close(), "Close is idempotent")
	byStatus := rep.assertOnce(t, 4)
	assert.Equal(t, 4, byStatus[netio.Canceled])
	_, st := rs.Send([]byte("late"))
	assert.Equal(t, netio.Closed, st)
	s := rs.Stats()
	assert.Equal(t, s.HandedOver, s.Completed+s.Failed+s.Canceled)
	assert.Zero(t, s.Backlog)
}

func TestReconnectingSenderRejectsBadConfig(t *testing.T) {
	mgr := openDomain(t, "tcp")
	shared, err := sendbuf.NewSendBufferManager(mgr, netio.BufferedSendParams{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, shared.Close()) }()
	for name, cfg := range map[string]endpoint.ReconnectConfig{
		"shared buffers":    {Send: endpoint.SendConfig{Buffers: sendbuf.Shared(shared)}},
		"negative backlog":  {Backlog: -1},
		"coalescing":        {Send: endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{}}},
		"max below initial": {InitialBackoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		_, err := endpoint.DialReconnecting(mgr, "127.0.0.1:1", cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
	}
	_, err = endpoint.DialReconnecting(mgr, "no-port", endpoint.ReconnectConfig{})
	assert.ErrorIs(t, err, netio.ErrBadAddress)
	_, err = endpoint.DialReconnecting(nil, "127.0.0.1:1", endpoint.ReconnectConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}

func TestReconnectingSenderRefusesOversizeMessage(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rs, err := endpoint.DialReconnecting(mgr, "127.0.0.1:1", endpoint.ReconnectConfig{
		Send: endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 64, BufferCount: 2}},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rs.Close()) }()
	_, st := rs.Send(make([]byte, 65))
	assert.Equal(t, netio.InvalidArgument, st)
	assert.Zero(t, rs.Stats().HandedOver, "a refused message is not counted")
}

func TestReconnectingSenderReportsInFlightOnBreak(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv1, rcv2 := newReceiver(), newReceiver()
	params := netio.ReceiveParams{BufferSize: 4096, BufferCount: 32}
	l1, err := endpoint.Listen(mgr, "127.0.0.1:0", rcv1.config(params))
	require.NoError(t, err)
	defer l1.Close()
	addr := l1.Addr()

	rep := &reports{statuses: map[uint64][]netio.Status{}}
	rs, err := endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{
		Send:            endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16}},
		InitialBackoff:  2 * time.Millisecond,
		MaxBackoff:      20 * time.Millisecond,
		OnSendCompleted: rep.record,
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rs.Close()) }()

	const total = 3000
	streamed := make(chan struct{})
	go func() { // no require here: report through the channel
		defer close(streamed)
		for seq := uint64(1); seq <= total; {
			if _, st := rs.Send(seqMessage(seq)); st == netio.OK {
				seq++
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	waitFor(t, 10*time.Second, func() bool { return rcv1.count.Load() >= 500 }, "stream under way")
	require.NoError(t, l1.Close()) // the server goes while messages are in flight
	l2, err := endpoint.Listen(mgr, addr, rcv2.config(params))
	require.NoError(t, err)
	defer func() { assert.NoError(t, l2.Close()) }()
	select {
	case <-streamed:
	case <-time.After(20 * time.Second):
		t.Fatal("stream did not finish after the restart")
	}
	waitFor(t, 10*time.Second, func() bool { return rep.count() == total }, "every key reported")

	rep.assertOnce(t, total)
	s := rs.Stats()
	assert.Equal(t, uint64(total), s.HandedOver)
	assert.Equal(t, s.HandedOver, s.Completed+s.Failed+s.Canceled)
	assert.LessOrEqual(t, rcv1.count.Load()+rcv2.count.Load(), int64(total), "nothing delivered twice")
	rcv2.mu.Lock()
	defer rcv2.mu.Unlock()
	for i := 1; i < len(rcv2.messages); i++ {
		assert.Less(t, binary.LittleEndian.Uint64(rcv2.messages[i-1]), binary.LittleEndian.Uint64(rcv2.messages[i]), "in order, never resent")
	}
	t.Logf("handed over %d: completed %d, failed %d; delivered %d before and %d after the restart",
		s.HandedOver, s.Completed, s.Failed, rcv1.count.Load(), rcv2.count.Load())
}

// TestReconnectingSenderStopsWhenDomainCloses: a sender whose domain is
// closed while it waits to reconnect stops by itself, as Close would: the
// backlog is reported Canceled once, OnConnectionChange hears ErrClosed,
// and Send refuses; it does not retry forever.
func TestReconnectingSenderStopsWhenDomainCloses(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	rep := &reports{statuses: map[uint64][]netio.Status{}}
	stopped := make(chan error, 1)
	pause := &pauseAtFirstDialFailure{failed: make(chan struct{}), resume: make(chan struct{})}
	rs, err := endpoint.DialReconnecting(mgr, "127.0.0.1:1", endpoint.ReconnectConfig{ // nothing listens: every dial fails
		Send: endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 2},
			Runtime: cq.Runtime{Logger: zerolog.New(pause)}},
		Backlog:         4,
		InitialBackoff:  time.Millisecond,
		MaxBackoff:      time.Millisecond,
		OnSendCompleted: rep.record,
		OnConnectionChange: func(connected bool, err error) {
			if !connected {
				select { // never connected: only the stop is reported
				case stopped <- err:
				default:
				}
			}
		},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, rs.Close()) }()

	// Close the domain while the sender waits between two dials (closing
	// it under a dial in progress is a use-after-close the domain does not
	// guard against).
	<-pause.failed
	sendAll(t, rs, 1, 3)
	require.NoError(t, mgr.Close(), "the failed dial left nothing behind")
	close(pause.resume)
	waitFor(t, 10*time.Second, func() bool { return rs.Stats().Canceled == 3 }, "the backlog reported without Close")

	assert.ErrorIs(t, <-stopped, netio.ErrClosed)
	assert.Equal(t, map[netio.Status]int{netio.Canceled: 3}, rep.assertOnce(t, 3))
	_, st := rs.Send(seqMessage(4))
	assert.Equal(t, netio.Closed, st)
	assert.False(t, rs.Connected())
	stats := rs.Stats()
	assert.Zero(t, stats.Backlog)
	assert.Zero(t, stats.Connections)
	assert.Equal(t, uint64(1), stats.DialErrors, "no dial into the closed domain")
	require.NoError(t, rs.Close())
	assert.Equal(t, uint64(3), rs.Stats().Canceled, "Close reports nothing twice")
}

// pauseAtFirstDialFailure is a log writer that holds a ReconnectingSender's
// dial goroutine at its first "dial failed" message, between two dials,
// until resume is closed.
type pauseAtFirstDialFailure struct {
	once           sync.Once
	failed, resume chan struct{}
}

func (w *pauseAtFirstDialFailure) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"dial failed"`)) {
		w.once.Do(func() {
			close(w.failed)
			<-w.resume
		})
	}
	return len(p), nil
}
