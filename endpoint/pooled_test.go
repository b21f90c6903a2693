package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// bufferPool opens a pool.Pool in mgr. At cleanup, which runs after that
// of the endpoints opened later, every buffer must be back in the pool;
// then the pool is closed, before mgr's own check.
func bufferPool(t *testing.T, mgr *domain.Manager, cfg pool.Config) *pool.Pool {
	t.Helper()
	p, err := pool.New(mgr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Zero(t, inUse(p), "buffers still leased from the pool")
		assert.NoError(t, p.Close())
	})
	return p
}

// inUse counts the leased buffers of every tier.
func inUse(p *pool.Pool) int { return p.Stats().InUse() }

// tierInUse counts the leased buffers of the tier of size bytes.
func tierInUse(p *pool.Pool, size int) int {
	for _, ts := range p.Stats().Tiers {
		if ts.Size == size {
			return ts.InUse
		}
	}
	return -1
}

// message is the content of message i; lengths vary with i.
func message(i int) []byte { return rmaPattern(100+i*37%2900, byte(i)) }

// pooledSender dials addr with send buffers leased from src.
func pooledSender(t *testing.T, mgr *domain.Manager, addr string, src *pool.Pool, p netio.BufferedSendParams) (*endpoint.SendEndpointBuffered, *sender) {
	t.Helper()
	snd := newSender(1024)
	cfg := snd.config(p)
	cfg.Buffers = sendbuf.Pooled(src)
	return dial(t, mgr, addr, cfg), snd
}

// sendMessages sends message(first) … message(first+n-1), waiting for
// completions when every buffer is in flight.
func sendMessages(t *testing.T, s *endpoint.SendEndpointBuffered, snd *sender, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		buf := s.GetBuffer()
		for buf == nil {
			select {
			case <-snd.done: // a completion gave one back
			case <-time.After(5 * time.Second):
				t.Fatal("no send completion within 5s")
			}
			buf = s.GetBuffer()
		}
		size := copy(buf.Bytes(), message(i))
		require.Equal(t, netio.OK, s.SendBuffer(buf, size))
	}
}

// TestPooledSendAndReceive sends through an endpoint whose send buffers are
// leased from one pool to a listener whose connection leases its receive
// buffers from another: nothing of their own is registered, the content
// arrives intact, and every buffer is back in its pool after Close.
func TestPooledSendAndReceive(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			const count, messages = 8, 300
			mgr := openDomain(t, prov)
			recvPool := bufferPool(t, mgr, pool.Config{Access: domain.AccessRecv, Size: 4096, Count: count})
			sendPool := bufferPool(t, mgr, pool.Config{NumTiers: 2, PerTier: count, FirstSize: 1024, SizeMultiple: 4})
			registered := mgr.Stats().Registrations

			rcv := newReceiver()
			cfg := rcv.config(netio.ReceiveParams{BufferSize: 4096, BufferCount: count})
			cfg.Buffers = recvPool
			l := listen(t, mgr, cfg)
			s, snd := pooledSender(t, mgr, l.Addr(), sendPool, netio.BufferedSendParams{BufferSize: 3000, BufferCount: count})
			waitFor(t, 5*time.Second, func() bool { return inUse(recvPool) == count }, "the connection's receive buffers")

			assert.Equal(t, count, tierInUse(sendPool, 4096), "3000 bytes fit the 4 KiB tier, not the 1 KiB one")
			assert.Equal(t, 3000, s.BufferSize(), "buffers are as large as asked, not as the tier")
			assert.Equal(t, registered, mgr.Stats().Registrations, "no registration of the endpoints' own")
			descs := map[uintptr]bool{}
			var held []*sendbuf.NetworkBuffer
			for range count {
				buf := s.GetBuffer()
				require.NotNil(t, buf)
				assert.Len(t, buf.Bytes(), 3000)
				descs[buf.Desc()] = true
				held = append(held, buf)
			}
			assert.Len(t, descs, count, "every buffer sends with its own registration's descriptor")
			for _, buf := range held {
				_, st := s.ReleaseBuffer(buf.ID())
				require.Equal(t, netio.OK, st)
			}

			sendMessages(t, s, snd, 0, messages)
			waitFor(t, 10*time.Second, func() bool { return rcv.count.Load() == messages }, "every message")
			rcv.mu.Lock()
			for i, m := range rcv.messages {
				assert.Equal(t, message(i), m, "message %d", i)
			}
			rcv.mu.Unlock()

			require.NoError(t, s.Close())
			assert.Zero(t, inUse(sendPool), "send buffers back at Close")
			waitFor(t, 5*time.Second, func() bool { return inUse(recvPool) == 0 }, "receive buffers back when the connection ends")
		})
	}
}

// TestPooledHeldBufferAfterClose: a buffer the caller still holds at Close
// stays leased, so the pool cannot give its memory to anyone else while
// the caller may write it; it goes back when the caller releases it, or
// when the caller drops it.
func TestPooledHeldBufferAfterClose(t *testing.T) {
	mgr := openDomain(t, "tcp")
	src := bufferPool(t, mgr, pool.Config{Size: 1024, Count: 2})
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{BufferCount: 4}))

	s, _ := pooledSender(t, mgr, l.Addr(), src, netio.BufferedSendParams{BufferSize: 1024, BufferCount: 2})
	held := s.GetBuffer()
	require.NotNil(t, held)
	require.NoError(t, s.Close())
	assert.Equal(t, 1, inUse(src), "the held buffer stays leased")
	other, st := src.TryGet(1024)
	require.Equal(t, netio.OK, st)
	_, st = src.TryGet(1024)
	assert.Equal(t, netio.NoResources, st, "the held buffer's memory is not handed out")
	copy(held.Bytes(), "late write")
	assert.NotEqual(t, "late write", string(other.Bytes()[:10]), "the late write stays in the held buffer")
	other.Release()
	assert.Equal(t, netio.Closed, s.SendBuffer(held, 10))
	_, st = s.ReleaseBuffer(held.ID())
	assert.Equal(t, netio.OK, st)
	assert.Zero(t, inUse(src), "released by the caller: back in the pool")

	// Not dial: its cleanup would keep the endpoint, and so the buffer,
	// reachable.
	dropped, err := endpoint.Dial(testCtx(t), mgr, l.Addr(), endpoint.SendConfig{Buffers: sendbuf.Pooled(src),
		Params: netio.BufferedSendParams{BufferSize: 1024, BufferCount: 2}})
	require.NoError(t, err)
	require.NotNil(t, dropped.GetBuffer())
	require.NoError(t, dropped.Close())
	assert.Equal(t, 1, inUse(src), "held when dropped")
	dropped = nil
	waitFor(t, 5*time.Second, func() bool { runtime.GC(); return inUse(src) == 0 },
		"the dropped buffer back in the pool once it and its endpoint are unreachable")
}

// TestPooledWrongPool: a pool registered without the access the buffers
// need, or in another domain, is refused before anything is leased or
// connected.
func TestPooledWrongPool(t *testing.T) {
	mgr := openDomain(t, "tcp")
	recvOnly := bufferPool(t, mgr, pool.Config{Access: domain.AccessRecv, Size: 4096, Count: 2})
	sendOnly := bufferPool(t, mgr, pool.Config{Access: domain.AccessSend, Size: 4096, Count: 2})
	foreign := bufferPool(t, openDomain(t, "tcp"), pool.Config{Access: domain.AccessSend | domain.AccessRecv, Size: 4096, Count: 2})
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{BufferCount: 4}))
	shared, err := sendbuf.NewSendBufferManager(mgr, netio.BufferedSendParams{BufferSize: 4096, BufferCount: 2})
	require.NoError(t, err)
	defer func() { assert.NoError(t, shared.Close()) }()

	for name, cfg := range map[string]endpoint.SendConfig{
		"receive-only pool": {Buffers: sendbuf.Pooled(recvOnly)},
		"foreign pool":      {Buffers: sendbuf.Pooled(foreign)},
	} {
		_, err := endpoint.Dial(testCtx(t), mgr, l.Addr(), cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
	}
	for name, src := range map[string]*pool.Pool{"send-only pool": sendOnly, "foreign pool": foreign} {
		cfg := newReceiver().config(netio.ReceiveParams{})
		cfg.Buffers = src
		_, err := endpoint.Listen(mgr, "127.0.0.1:0", cfg)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
	}
	for _, p := range []*pool.Pool{recvOnly, sendOnly, foreign} {
		assert.Zero(t, inUse(p), "nothing leased")
	}
	assert.Zero(t, l.Accepted(), "nothing connected")
}

// TestPooledSendPoolTooSmall: Dial fails when the pool cannot supply every
// send buffer, and keeps none of them.
func TestPooledSendPoolTooSmall(t *testing.T) {
	mgr := openDomain(t, "tcp")
	src := bufferPool(t, mgr, pool.Config{Size: 4096, Count: 2, Budget: 3 * 4096})
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{BufferCount: 4}))
	_, err := endpoint.Dial(testCtx(t), mgr, l.Addr(), endpoint.SendConfig{Buffers: sendbuf.Pooled(src),
		Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 4}})
	require.ErrorIs(t, err, netio.ErrNoResources)
	assert.Zero(t, inUse(src), "the buffers leased before the refusal went back")
	assert.Equal(t, int64(3*4096), src.Stats().RegisteredBytes, "grown up to the budget, no further")
	assert.Zero(t, l.Accepted(), "no connection without buffers")
}

// TestPooledListenerSurvivesExhaustedPool: a connection the receive pool
// cannot supply is rejected, the established one goes on, and once its
// buffers are back a new connection gets them.
func TestPooledListenerSurvivesExhaustedPool(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			const count, size = 4, 2048
			mgr := openDomain(t, prov)
			// Empty, with room for one connection's buffers.
			src := bufferPool(t, mgr, pool.Config{Access: domain.AccessRecv, Size: size, Budget: count * size})
			rcv := newReceiver()
			cfg := rcv.config(netio.ReceiveParams{BufferSize: size, BufferCount: count})
			cfg.Buffers = src
			l := listen(t, mgr, cfg)
			params := netio.BufferedSendParams{BufferSize: size, BufferCount: count}

			first := dial(t, mgr, l.Addr(), newSender(16).config(params))
			waitFor(t, 5*time.Second, func() bool { return inUse(src) == count }, "the first connection's buffers")
			_, err := endpoint.Dial(testCtx(t), mgr, l.Addr(), endpoint.SendConfig{Params: params})
			assert.ErrorIs(t, err, netio.ErrConnectionRefused, "no buffers for a second connection")
			assert.Equal(t, uint64(1), l.Rejected())
			assert.Equal(t, count, inUse(src), "the rejected connection leased nothing")

			buf := first.GetBuffer()
			require.NotNil(t, buf)
			require.Equal(t, netio.OK, first.SendBuffer(buf, copy(buf.Bytes(), "still served")))
			waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 1 }, "the first connection's message")

			require.NoError(t, first.Close())
			waitFor(t, 5*time.Second, func() bool { return inUse(src) == 0 }, "the first connection's buffers back")
			third := dial(t, mgr, l.Addr(), newSender(16).config(params))
			buf = third.GetBuffer()
			require.NotNil(t, buf)
			require.Equal(t, netio.OK, third.SendBuffer(buf, copy(buf.Bytes(), "served again")))
			waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 2 }, "the third connection's message")
			rcv.mu.Lock()
			assert.Equal(t, [][]byte{[]byte("still served"), []byte("served again")}, rcv.messages)
			rcv.mu.Unlock()
			assert.Equal(t, int64(count*size), src.Stats().RegisteredBytes, "the third connection reused the buffers")
			require.NoError(t, third.Close())
			waitFor(t, 5*time.Second, func() bool { return inUse(src) == 0 }, "buffers back at the end")
		})
	}
}

// TestPooledDialFailureReturnsBuffers: a dial that fails after leasing
// gives every lease back.
func TestPooledDialFailureReturnsBuffers(t *testing.T) {
	mgr := openDomain(t, "tcp")
	src := bufferPool(t, mgr, pool.Config{Size: 4096, Count: 4})
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", newReceiver().config(netio.ReceiveParams{}))
	require.NoError(t, err)
	addr := l.Addr()
	require.NoError(t, l.Close()) // nobody listens there now
	_, err = endpoint.Dial(testCtx(t), mgr, addr, endpoint.SendConfig{Buffers: sendbuf.Pooled(src),
		Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 4}})
	require.Error(t, err)
	assert.False(t, errors.Is(err, netio.ErrInvalidArgument), "refused by the peer, not by the arguments: %v", err)
	assert.Zero(t, inUse(src))
}

// Endpoints can borrow their buffers from pools instead of registering
// regions of their own: every connection of the listener leases its
// receive buffers from one pool (bounded by its Budget), and the sender
// leases its send buffers from another.
func ExampleListenConfig_buffers() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close() // last: after the pools

	// Room for 4 connections of 16 buffers of 4 KiB, registered as needed.
	recvPool, err := pool.New(mgr, pool.Config{Access: domain.AccessRecv, Size: 4096, Budget: 4 * 16 * 4096})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer recvPool.Close() // after the listener
	sendPool, err := pool.New(mgr, pool.Config{Access: domain.AccessSend, Size: 4096, Count: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sendPool.Close() // after the sender

	got := make(chan string, 1)
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params:  netio.ReceiveParams{BufferSize: 4096, BufferCount: 16},
		Buffers: recvPool,
		OnData:  func(_ *endpoint.ReceiveEndpoint, data []byte) { got <- string(data) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params:  netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16},
		Buffers: sendbuf.Pooled(sendPool),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	buf := s.GetBuffer()
	if st := s.SendBuffer(buf, copy(buf.Bytes(), "from a pooled buffer")); st != netio.OK {
		fmt.Println("send:", st)
		return
	}
	fmt.Println(<-got)
	fmt.Println(sendPool.Stats().InUse(), "send buffers leased")
	// Output:
	// from a pooled buffer
	// 16 send buffers leased
}
