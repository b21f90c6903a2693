package endpoint_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// A ReconnectingSender with SendConfig.Inject, streaming 64 B messages
// while its server goes away and comes back: every key is reported exactly
// once, and the messages after the reconnection arrive in order.
func TestReconnectingSenderInject(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	l1, err := endpoint.Listen(mgr, "127.0.0.1:0", rcv.config(netio.ReceiveParams{BufferSize: 4096, BufferCount: 32}))
	require.NoError(t, err)
	addr := l1.Addr()
	defer l1.Close()

	rs, rep, changes := dialRestartable(t, mgr, addr,
		endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 64, BufferCount: 16}, Inject: true})

	send := func(first, last uint64) {
		deadline := time.Now().Add(20 * time.Second)
		msg := make([]byte, 64)
		for seq := first; seq <= last; {
			binary.LittleEndian.PutUint64(msg, seq)
			switch _, st := rs.Send(msg); st {
			case netio.OK:
				seq++
			case netio.NoResources:
				require.True(t, time.Now().Before(deadline), "sender stayed full")
				time.Sleep(100 * time.Microsecond)
			default:
				require.Failf(t, "send", "message %d: %v", seq, st)
			}
		}
	}
	send(1, 2000)
	require.NoError(t, l1.Close())
	require.False(t, <-changes, "connection ends with the server")

	rcv2 := newReceiver()
	l2, err := endpoint.Listen(mgr, addr, rcv2.config(netio.ReceiveParams{BufferSize: 4096, BufferCount: 32}))
	require.NoError(t, err)
	defer func() { assert.NoError(t, l2.Close()) }()
	require.True(t, <-changes, "reconnected")
	send(2001, 3000)
	waitFor(t, 10*time.Second, func() bool { return rep.count() == 3000 }, "every key reported")
	time.Sleep(20 * time.Millisecond) // a second report would come now

	byStatus := rep.assertOnce(t, 3000)
	assert.Equal(t, 3000, byStatus[netio.OK]+byStatus[netio.Failed], "reported sent or failed, none canceled")
	waitFor(t, 10*time.Second, func() bool { return rcv2.count.Load() >= 1000 }, "the messages after the reconnection")
	rcv2.mu.Lock()
	defer rcv2.mu.Unlock()
	last := uint64(0)
	for _, msg := range rcv2.messages {
		seq := binary.LittleEndian.Uint64(msg)
		assert.Greater(t, seq, last, "in order")
		last = seq
	}
	assert.Equal(t, uint64(3000), last)
}

// TestReconnectingSenderRetriesBacklogAtBound: a ReconnectingSender with
// Inject whose backlog, built while nobody listened, is larger than what a
// stalled receiver's sockets and MaxInjectsHeld take: the drain is refused
// at the bound after every report was made, so no completion restarts it.
// Once the receiver goes on, the whole backlog arrives, in order, every key
// reported OK once, with no further Send: the sender retries a refused
// backlog on a timer, backing off while the stall lasts (counted over a
// window of it), but only as its own retries are refused: a burst of Sends
// into the stall, each refused, leaves the wait where it was, where it
// used to double it each time (64 ms after 7 Sends, though the stall
// could clear a millisecond later). Before, it waited until Close
// canceled it. The
// report queue (sendcore.InjectQueueFactor per buffer) holds the whole
// backlog, so that no send goes the regular way, whose completion after
// the release would restart the drain and hide the fault.
func TestReconnectingSenderRetriesBacklogAtBound(t *testing.T) {
	const (
		backlog = stallInjects // above what the sockets take (half that) and the bound
		buffers = backlog / 16 // sendcore.InjectQueueFactor
	)
	mgr := openDomain(t, "tcp")
	l0, err := endpoint.Listen(mgr, "127.0.0.1:0", newReceiver().config(netio.ReceiveParams{}))
	require.NoError(t, err)
	addr := l0.Addr()
	require.NoError(t, l0.Close()) // nobody listens there until the backlog is full

	rep := &reports{statuses: map[uint64][]netio.Status{}}
	changes := make(chan bool, 16)
	rs, err := endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{
		Send: endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: stallSize, BufferCount: buffers},
			Inject: true, MaxInjectsHeld: boundHeld},
		Backlog:            backlog,
		InitialBackoff:     2 * time.Millisecond,
		MaxBackoff:         20 * time.Millisecond,
		OnSendCompleted:    rep.record,
		OnConnectionChange: func(up bool, _ error) { changes <- up },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rs.Close()) })
	msg := make([]byte, stallSize)
	for seq := uint64(1); seq <= backlog; seq++ {
		binary.LittleEndian.PutUint64(msg, seq)
		_, st := rs.Send(msg)
		require.Equal(t, netio.OK, st, "message %d into the backlog", seq)
	}

	gate := make(chan struct{})
	var stallOnce, releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate) }) }
	var mu sync.Mutex
	var got []uint64
	rcv := newReceiver()
	rcv.onData = func(_ *endpoint.ReceiveEndpoint, data []byte) {
		stallOnce.Do(func() { <-gate })
		mu.Lock()
		got = append(got, binary.LittleEndian.Uint64(data))
		mu.Unlock()
	}
	l, err := endpoint.Listen(mgr, addr, rcv.config(netio.ReceiveParams{BufferSize: stallSize, BufferCount: 16}))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	t.Cleanup(release) // before the listener closes
	require.True(t, recvValue(t, changes, 10*time.Second, "the connection"), "connected")
	waitFor(t, 30*time.Second, func() bool {
		st := rs.Stats()
		return st.Backlog > 0 && st.Completed+uint64(st.Backlog) == st.HandedOver &&
			endpoint.ReconnectingSendsHeld(rs) >= boundHeld
	}, "the drain refused at the bound, every send it posted reported, messages left in the backlog")
	t.Logf("at the bound: %+v", rs.Stats())

	// While the peer stays stalled the timer backs off: over a window of
	// about 8 caps, at most one retry per cap plus the doubling up to it
	// (1, 2, ... 32 ms) and slack, where a retry every millisecond made
	// hundreds; and at least one, or the backlog would wait for Close.
	const window = 500 * time.Millisecond
	before := endpoint.BacklogRetries(rs)
	time.Sleep(window)
	retries := endpoint.BacklogRetries(rs) - before
	t.Logf("%d retries in %v of stall", retries, window)
	assert.LessOrEqual(t, retries, uint64(window/endpoint.BacklogRetryMax)+10, "retries back off while the peer stays stalled")
	assert.NotZero(t, retries, "the refused backlog is still retried")

	// A burst of Sends into the stall, each drain refused, from the first
	// wait: only the timer's own refused retries may double it meanwhile
	// (under load some may run), so the wait stays within BacklogRetry
	// doubled once per retry that ran, far below the cap.
	const burst = 7
	endpoint.ShortenBacklogRetry(rs)
	_, before = endpoint.BacklogRetryWait(rs)
	for seq := uint64(backlog + 1); seq <= backlog+burst; seq++ {
		binary.LittleEndian.PutUint64(msg, seq)
		_, st := rs.Send(msg)
		require.Equal(t, netio.OK, st, "message %d into the backlog", seq)
	}
	wait, after := endpoint.BacklogRetryWait(rs)
	t.Logf("wait %v after %d refused Sends, %d timer retries meanwhile", wait, burst, after-before)
	assert.LessOrEqual(t, wait, min(endpoint.BacklogRetry<<min(after-before, 16), endpoint.BacklogRetryMax),
		"refused Sends do not lengthen the retry wait")

	// Refused Sends that keep coming do not push the pending retry out:
	// the timer runs within a cap of them, where each Send used to re-arm
	// it and it ran only once they paused for longer than the wait.
	seq := uint64(backlog + burst)
	_, before = endpoint.BacklogRetryWait(rs)
	deadline := time.Now().Add(5 * time.Second)
	for after = before; after == before && time.Now().Before(deadline); _, after = endpoint.BacklogRetryWait(rs) {
		seq++
		binary.LittleEndian.PutUint64(msg, seq)
		_, st := rs.Send(msg)
		require.Equal(t, netio.OK, st, "message %d into the backlog", seq)
		time.Sleep(200 * time.Microsecond)
	}
	t.Logf("a retry ran after %d more refused Sends", seq-backlog-burst)
	assert.Greater(t, after, before, "the pending retry ran while refused Sends kept coming")

	total := int(seq)
	release()
	waitFor(t, 30*time.Second, func() bool { return rcv.count.Load() == int64(total) }, "the whole backlog delivered")
	waitFor(t, 10*time.Second, func() bool { return rep.count() == total }, "every key reported")
	st := rs.Stats()
	t.Logf("after the release: %+v", st)
	assert.Zero(t, st.Backlog)
	byStatus := rep.assertOnce(t, seq)
	assert.Equal(t, total, byStatus[netio.OK], "every message reported OK")
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range got {
		if !assert.Equal(t, uint64(i+1), seq, "in order") {
			break
		}
	}
}
