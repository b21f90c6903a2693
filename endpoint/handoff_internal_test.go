package endpoint

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/sendbuf"
)

func TestHandOffRing(t *testing.T) {
	var h handOff
	h.init(2)
	a, b, c := &sendbuf.NetworkBuffer{}, &sendbuf.NetworkBuffer{}, &sendbuf.NetworkBuffer{}
	assert.False(t, h.busy())

	queued, schedule := h.push(a, 1)
	assert.True(t, queued)
	assert.True(t, schedule, "the first push schedules a drain")
	queued, schedule = h.push(b, 2)
	assert.True(t, queued)
	assert.False(t, schedule, "a drain is due already")
	queued, _ = h.push(c, 3)
	assert.False(t, queued, "the ring holds two")
	assert.True(t, h.busy())

	q, ok := h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{a, 1}, q)
	q, _ = h.peek()
	assert.Equal(t, queuedSend{a, 1}, q, "peek leaves the send queued until pop")
	h.pop()
	q, ok = h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{b, 2}, q)
	queued, schedule = h.push(c, 3) // wraps around the ring's end
	assert.True(t, queued)
	assert.False(t, schedule, "still draining")
	h.pop()
	q, _ = h.peek()
	assert.Equal(t, queuedSend{c, 3}, q)
	h.pop()

	_, ok = h.peek()
	assert.False(t, ok)
	assert.False(t, h.busy())
	_, schedule = h.push(a, 1)
	assert.True(t, schedule, "an empty peek ended the drain: the next push schedules one")

	h.reset()
	assert.False(t, h.busy())
	_, ok = h.peek()
	assert.False(t, ok)
	assert.Equal(t, make([]queuedSend, 2), h.ring, "reset lets go of the buffers")
}

// Sends still queued for the poller when the connection ends are reported
// Canceled, and their buffers go back; none is posted after the close.
func TestHandOffQueuedSendsCanceledAtTeardown(t *testing.T) {
	const bufs = 4
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	p, err := cq.Open(mgr.Fabric(), mgr.Domain(), cq.Config{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	l, err := Listen(mgr, "127.0.0.1:0", ListenConfig{
		Params: netio.ReceiveParams{BufferSize: HandOffSize, BufferCount: bufs},
		OnData: func(*ReceiveEndpoint, []byte) {},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, l.Close()) }()

	var mu sync.Mutex
	statuses := map[uint64]netio.Status{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, mgr, l.Addr(), SendConfig{
		Params: netio.BufferedSendParams{BufferSize: HandOffSize, BufferCount: bufs},
		Poller: p,
		OnSendCompleted: func(key uint64, st netio.Status) {
			mu.Lock()
			statuses[key] = st
			mu.Unlock()
		},
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()

	// Hold the poller, then queue the teardown ahead of the drain that the
	// sends below schedule.
	release := make(chan struct{})
	p.Go(func() { <-release })
	p.Go(func() { s.c.teardown(netio.ErrClosed) })
	for range bufs {
		buf := s.GetBuffer()
		require.NotNil(t, buf)
		require.Equal(t, netio.OK, s.SendBuffer(buf, HandOffSize))
	}
	assert.True(t, s.handOff.busy(), "the sends wait for the poller")
	assert.Len(t, s.PendingSends(), bufs)
	close(release)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(statuses) == bufs
	}, 10*time.Second, time.Millisecond, "every queued send reported")
	mu.Lock()
	for key, st := range statuses {
		assert.Equal(t, netio.Canceled, st, "key %d", key)
	}
	mu.Unlock()
	assert.Equal(t, SendStats{Sent: bufs, Bytes: bufs * HandOffSize, Failed: bufs}, s.Stats())
	assert.False(t, s.handOff.busy())
	assert.Empty(t, s.PendingSends())
	assert.Equal(t, netio.Closed, s.SendBuffer(s.pool.Lookup(0), HandOffSize), "nothing is queued after the end")
}
