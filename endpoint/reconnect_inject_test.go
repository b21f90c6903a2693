package endpoint_test

import (
	"encoding/binary"
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
