package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/sendbuf"
)

// pattern fills b with message k's content: byte i is (k+i)%251.
func pattern(b []byte, k int) { copy(b, patternOf(k, len(b))) }

// patternTable holds byte j = j%251 for every seed and length patternOf
// serves, so that a test checks a message with one comparison instead of
// a loop per byte (under -race each byte of such a loop is a call).
var patternTable = sync.OnceValue(func() []byte {
	b := make([]byte, 251+patternMax)
	for j := range b {
		b[j] = byte(j % 251)
	}
	return b
})

// patternMax is the longest message patternOf serves from its table.
const patternMax = 1 << 20

// patternOf returns n bytes whose byte i is (seed+i)%251; the caller must
// not change them.
func patternOf(seed, n int) []byte {
	if n > patternMax {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte((seed + i) % 251)
		}
		return b
	}
	s := seed % 251
	return patternTable()[s : s+n]
}

// mixedSize gives message k a size in 0..4096 that the receiver can
// recompute, with small messages more frequent than large ones.
func mixedSize(k int) int {
	x := uint32(k)*2654435761 + 12345
	switch x % 4 {
	case 0:
		return int(x>>8) % 65
	case 1, 2:
		return int(x>>8) % 1025
	default:
		return int(x>>8) % 4097
	}
}

func TestMixedSizesContentChecked(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			t.Parallel() // the providers' streams share nothing; each waits on wake-ups more than it computes
			streamChecked(t, prov, 100_000, 4096, 64, mixedSize)
		})
	}
}

// streamChecked sends total messages through one buffered send endpoint of
// bufs buffers of bufSize bytes, message k of sizeOf(k) bytes carrying
// pattern k, and checks that each arrives whole and in order, and that
// every send completed.
func streamChecked(t *testing.T, prov string, total, bufSize, bufs int, sizeOf func(int) int) {
	mgr := openDomain(t, prov)
	var next, bad atomic.Int64
	rcv := newReceiver()
	rcv.onData = func(_ *endpoint.ReceiveEndpoint, data []byte) {
		k := int(next.Add(1) - 1)
		if !bytes.Equal(data, patternOf(k, sizeOf(k))) {
			bad.Add(1)
		}
	}
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{BufferSize: bufSize, BufferCount: 2 * bufs}))
	snd := newSender(bufs)
	s := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: bufSize, BufferCount: bufs}))

	for k := 0; k < total; {
		buf := s.GetBuffer()
		if buf == nil {
			<-snd.done // wait for a completion instead of spinning
			continue
		}
		n := sizeOf(k)
		pattern(buf.Bytes()[:n], k)
		require.Equal(t, netio.OK, s.SendBuffer(buf, n), "message %d", k)
		k++
	}
	waitFor(t, 60*time.Second, func() bool { return rcv.count.Load() == int64(total) }, "all messages")
	waitFor(t, 10*time.Second, func() bool { return s.Stats().Completed == uint64(total) }, "all completions")
	assert.Zero(t, bad.Load(), "messages out of order, or whose size or content differ")
	st := s.Stats()
	assert.Equal(t, uint64(total), st.Sent)
	assert.Zero(t, st.Failed)
	assert.Empty(t, s.PendingSends())
	assert.Equal(t, int32(1), rcv.est.Load(), "one connection established")
}

func TestSenderClosesFirst(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
			snd := newSender(4)
			s := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 4}))
			buf := s.GetBuffer()
			copy(buf.Bytes(), "last words")
			require.Equal(t, netio.OK, s.SendBuffer(buf, 10))
			<-snd.done
			// The accept must have returned first: libfabric 1.17's sockets
			// drops a close that reaches the peer's CM thread while its
			// fi_accept is still running (it checks the connection state
			// before fi_accept sets it), and then never reports it; see
			// ListenConfig.IdleTimeout. The listener counts a connection once
			// fi_accept has returned.
			waitFor(t, 5*time.Second, func() bool { return len(l.Connections()) == 1 }, "the receiver to hold the connection")

			require.NoError(t, s.Close())
			err := recvErr(t, rcv.closed, 5*time.Second, "connection-closed on the receiver")
			assert.ErrorIs(t, err, netio.ErrConnectionClosed)
			assert.ErrorIs(t, recvErr(t, snd.closed, time.Second, "sender's own close"), netio.ErrClosed)
			assert.NoError(t, s.Close(), "Close is idempotent")
			rcv.mu.Lock()
			assert.Equal(t, [][]byte{[]byte("last words")}, rcv.messages)
			rcv.mu.Unlock()
			waitFor(t, 5*time.Second, func() bool { return len(l.Connections()) == 0 }, "listener to forget the connection")
		})
	}
}

func TestReceiverClosesFirst(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
			snd := newSender(4)
			s := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 4}))
			waitFor(t, 5*time.Second, func() bool { return len(l.Connections()) == 1 }, "the connection")

			require.NoError(t, l.Close())
			assert.ErrorIs(t, recvErr(t, rcv.closed, time.Second, "receiver's own close"), netio.ErrClosed)
			err := recvErr(t, snd.closed, 5*time.Second, "connection-closed on the sender")
			assert.ErrorIs(t, err, netio.ErrConnectionClosed)

			assert.Nil(t, s.GetBuffer(), "no buffers after the connection ended")
			assert.NoError(t, l.Close(), "Close is idempotent")
		})
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port is now free: nobody listens
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			s, err := endpoint.Dial(ctx, mgr, addr, endpoint.SendConfig{})
			assert.Nil(t, s)
			assert.ErrorIs(t, err, netio.ErrConnectionRefused)
			assert.Contains(t, err.Error(), addr)
			assert.Less(t, time.Since(start), 2*time.Second, "a refusal is reported at once")
		})
	}
}

// A plain TCP listener accepts the socket but never speaks libfabric's
// connection protocol: Dial must give up at the context's deadline.
func TestDialHonoursDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := endpoint.Dial(ctx, mgr, ln.Addr().String(), endpoint.SendConfig{})
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 3*time.Second)
		})
	}
}

func TestDialCanceled(t *testing.T) {
	mgr := openDomain(t, "tcp")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := endpoint.Dial(ctx, mgr, "127.0.0.1:9", endpoint.SendConfig{})
	require.Error(t, err)
	// Either the refusal or the cancellation wins; neither hangs.
	assert.True(t, errors.Is(err, context.Canceled) || errors.Is(err, netio.ErrConnectionRefused), "got %v", err)
}

func TestBadAddresses(t *testing.T) {
	mgr := openDomain(t, "tcp")
	for _, addr := range []string{"", "nonsense", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":4000", "127.0.0.1:port"} {
		_, err := endpoint.Dial(context.Background(), mgr, addr, endpoint.SendConfig{})
		assert.ErrorIs(t, err, netio.ErrBadAddress, "dial %q", addr)
	}
	cfg := endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {}}
	for _, addr := range []string{"nonsense", "127.0.0.1:-1", "127.0.0.1:99999"} {
		_, err := endpoint.Listen(mgr, addr, cfg)
		assert.ErrorIs(t, err, netio.ErrBadAddress, "listen %q", addr)
	}
	_, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "listen without OnData")
	cfg.Params.BufferCount = mgr.Info().RxSize() + 1
	_, err = endpoint.Listen(mgr, "127.0.0.1:0", cfg)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "more receive buffers than the provider keeps posted")
	_, err = endpoint.Dial(context.Background(), mgr, "127.0.0.1:1", endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: -1}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}

func TestSendAfterClose(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
			s := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 4}))
			buf := s.GetBuffer()
			require.NotNil(t, buf)
			require.NoError(t, s.Close())
			assert.Equal(t, netio.Closed, s.SendBuffer(buf, 8))
			assert.Nil(t, s.GetBuffer())
		})
	}
}

func TestBadSendsChangeNothing(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4}))
	snd := newSender(4)
	s := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: 128, BufferCount: 4}))
	other := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 128, BufferCount: 4}))

	buf := s.GetBuffer()
	require.NotNil(t, buf)
	before := s.NumAvailableBuffers()
	assert.Equal(t, netio.InvalidArgument, s.SendBuffer(buf, 129), "larger than the buffer")
	assert.Equal(t, netio.InvalidArgument, s.SendBuffer(buf, -1))
	assert.Equal(t, netio.InvalidArgument, s.SendBuffer(nil, 1))
	assert.Equal(t, netio.InvalidArgument, other.SendBuffer(buf, 1), "another endpoint's buffer")
	assert.Empty(t, s.PendingSends(), "nothing was posted")
	assert.Equal(t, before, s.NumAvailableBuffers())

	// The buffer is still the caller's: it can be sent, and only once.
	require.Equal(t, netio.OK, s.SendBuffer(buf, 128))
	assert.Equal(t, netio.InvalidArgument, s.SendBuffer(buf, 128), "already in flight")
	<-snd.done
	waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 1 }, "the message")
	assert.Equal(t, map[uint64][]netio.Status{buf.ID(): {netio.OK}}, snd.statuses)
}

func TestReleaseUnknownAndTwice(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	s := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 4}))
	buf := s.GetBuffer()
	require.NotNil(t, buf)

	_, st := s.ReleaseBuffer(4)
	assert.Equal(t, netio.InvalidArgument, st, "unknown ID")
	_, st = s.ReleaseBuffer(1 << 40)
	assert.Equal(t, netio.InvalidArgument, st, "unknown ID")
	_, st = s.ReleaseBuffer(buf.ID() + 1)
	assert.Equal(t, netio.InvalidArgument, st, "a free buffer")

	key, st := s.ReleaseBuffer(buf.ID())
	assert.Equal(t, netio.OK, st)
	assert.Equal(t, buf.ID(), key)
	_, st = s.ReleaseBuffer(buf.ID())
	assert.Equal(t, netio.InvalidArgument, st, "released twice")
	assert.Equal(t, netio.InvalidArgument, s.SendBuffer(buf, 1), "sending a released buffer")

	// The pool is whole: all four buffers can be leased again.
	var got []*sendbuf.NetworkBuffer
	for b := s.GetBuffer(); b != nil; b = s.GetBuffer() {
		got = append(got, b)
	}
	assert.Len(t, got, 4)
}

func TestZeroLengthMessage(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
			snd := newSender(4)
			s := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 4}))
			for _, n := range []int{0, 3, 0} {
				buf := s.GetBuffer()
				copy(buf.Bytes(), "abc")
				require.Equal(t, netio.OK, s.SendBuffer(buf, n))
			}
			waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 3 }, "three messages")
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			assert.Equal(t, []string{"", "abc", ""}, []string{string(rcv.messages[0]), string(rcv.messages[1]), string(rcv.messages[2])})
		})
	}
}

// Sends stuck behind a stalled receiver are reported exactly once each when
// the sender closes, and every buffer comes back. Only tcp keeps sends in
// flight behind a stalled peer: sockets completes a send as soon as it has
// copied the data into its own buffers.
//
// The test counts outcomes instead of comparing with a snapshot of the
// pending keys, because sends may still complete between any snapshot and
// Close (on a busy machine they did). Every report runs on the poller
// goroutine, and so does the cancellation in Close, so the order of the
// reports says what was pending when Close took over: the keys reported
// Canceled are exactly those not yet reported OK then, if and only if every
// key is reported once and no OK follows a Canceled. A snapshot taken
// before Close still bounds them: a key that was not pending then cannot be
// canceled.
func TestPendingKeysReportedOnClose(t *testing.T) {
	const bufs, size = 16, 1 << 20
	for _, prov := range []string{"tcp"} {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			release := make(chan struct{})
			rcv := newReceiver()
			rcv.onData = func(*endpoint.ReceiveEndpoint, []byte) { <-release } // stall the receiver's poller
			l := listen(t, mgr, rcv.config(netio.ReceiveParams{BufferSize: size, BufferCount: 2}))
			defer close(release) // before l.Close, which waits for the poller

			type outcome struct {
				key uint64
				st  netio.Status
			}
			var mu sync.Mutex
			var outcomes []outcome // in the order reported
			cfg := endpoint.SendConfig{
				Params: netio.BufferedSendParams{BufferSize: size, BufferCount: bufs},
				OnSendCompleted: func(key uint64, st netio.Status) {
					mu.Lock()
					outcomes = append(outcomes, outcome{key, st})
					mu.Unlock()
				},
			}
			s := dial(t, mgr, l.Addr(), cfg)
			var leased []*sendbuf.NetworkBuffer // lease all first: each key is sent once
			for range bufs {
				b := s.GetBuffer()
				require.NotNil(t, b)
				leased = append(leased, b)
			}
			sent := map[uint64]bool{}
			for _, b := range leased {
				sent[b.ID()] = true
				require.Equal(t, netio.OK, s.SendBuffer(b, size))
			}
			require.Len(t, sent, bufs, "distinct keys")

			// Let what can complete, complete: wait until the pending set
			// has not changed for a while. This only narrows the window
			// between the snapshot and Close; the checks hold either way.
			pending := s.PendingSends()
			for stable, deadline := time.Now(), time.Now().Add(10*time.Second); time.Since(stable) < 300*time.Millisecond && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				if now := s.PendingSends(); len(now) != len(pending) {
					pending, stable = now, time.Now()
				}
			}
			require.NotEmpty(t, pending, "the stalled receiver keeps sends in flight")
			wasPending := map[uint64]bool{}
			for _, key := range pending {
				wasPending[key] = true
			}

			require.NoError(t, s.Close(), "Close fails if a buffer is still posted")
			assert.Empty(t, s.PendingSends(), "every buffer came back")

			mu.Lock()
			defer mu.Unlock()
			reports := map[uint64]int{}
			var ok, canceled []uint64
			for i, o := range outcomes {
				reports[o.key]++
				assert.True(t, sent[o.key], "report %d: key %d was never sent", i, o.key)
				switch o.st {
				case netio.OK:
					ok = append(ok, o.key)
					assert.Empty(t, canceled, "report %d: key %d reported OK after Close canceled %v", i, o.key, canceled)
				case netio.Canceled:
					canceled = append(canceled, o.key)
					assert.True(t, wasPending[o.key], "key %d canceled but it was not pending before Close (%v)", o.key, pending)
				default:
					assert.Failf(t, "unexpected status", "report %d: key %d: %v", i, o.key, o.st)
				}
			}
			for key := range sent {
				assert.Equal(t, 1, reports[key], "key %d reported once", key)
			}
			assert.Len(t, outcomes, bufs, "as many reports as sends")
			assert.NotEmpty(t, canceled, "Close reports the sends still pending as Canceled")
			t.Logf("%d sent: %d pending before Close, %d of them completed before it, %d canceled",
				bufs, len(pending), len(pending)-len(canceled), len(canceled))

			st := s.Stats()
			assert.Equal(t, uint64(bufs), st.Sent)
			assert.Equal(t, uint64(len(ok)), st.Completed)
			assert.Equal(t, uint64(len(canceled)), st.Failed)
		})
	}
}

func TestNumAvailableBuffersIsMinimumSinceLastCall(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	s := dial(t, mgr, l.Addr(), newSender(8).config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 8}))
	assert.Equal(t, 8, s.NumAvailableBuffers())
	var held []*sendbuf.NetworkBuffer
	for range 3 {
		held = append(held, s.GetBuffer())
	}
	for _, b := range held {
		_, st := s.ReleaseBuffer(b.ID())
		require.Equal(t, netio.OK, st)
	}
	assert.Equal(t, 5, s.NumAvailableBuffers(), "the low point, though all are free again")
	assert.Equal(t, 8, s.NumAvailableBuffers(), "a new interval starts at the current count")
}

// TestFreeBuffersIsNow: FreeBuffers counts the buffers free at the moment
// and starts no interval: NumAvailableBuffers still reports the low point.
func TestFreeBuffersIsNow(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	s := dial(t, mgr, l.Addr(), newSender(8).config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 8}))
	assert.Equal(t, 8, s.FreeBuffers())
	b := s.GetBuffer()
	require.NotNil(t, b)
	assert.Equal(t, 7, s.FreeBuffers())
	_, st := s.ReleaseBuffer(b.ID())
	require.Equal(t, netio.OK, st)
	assert.Equal(t, 8, s.FreeBuffers())
	assert.Equal(t, 7, s.NumAvailableBuffers(), "FreeBuffers started a new interval")
}

func TestSharedBuffers(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
	shared, err := sendbuf.NewSendBufferManager(mgr, netio.BufferedSendParams{BufferSize: 256, BufferCount: 4})
	require.NoError(t, err)
	sa, sb := newSender(4), newSender(4)
	cfgA, cfgB := sa.config(netio.BufferedSendParams{}), sb.config(netio.BufferedSendParams{})
	cfgA.Buffers, cfgB.Buffers = sendbuf.Shared(shared), sendbuf.Shared(shared)
	a, err := endpoint.Dial(context.Background(), mgr, l.Addr(), cfgA)
	require.NoError(t, err)
	b, err := endpoint.Dial(context.Background(), mgr, l.Addr(), cfgB)
	require.NoError(t, err)

	assert.Equal(t, 256, a.BufferSize())
	ba := a.GetBuffer()
	bb := b.GetBuffer()
	require.NotNil(t, ba)
	require.NotNil(t, bb)
	assert.NotEqual(t, ba.ID(), bb.ID(), "one pool hands out distinct buffers")
	assert.Equal(t, netio.InvalidArgument, b.SendBuffer(ba, 1), "a buffer is sent by the endpoint that leased it")
	require.Equal(t, netio.OK, a.SendBuffer(ba, 1))
	require.Equal(t, netio.OK, b.SendBuffer(bb, 1))
	<-sa.done
	<-sb.done
	waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 2 }, "both messages")

	assert.ErrorIs(t, shared.Close(), netio.ErrNoResources, "endpoints still attached")
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	require.NoError(t, shared.Close())
	assert.NoError(t, shared.Close(), "idempotent")
}

// Closing from inside a callback must not deadlock.
func TestCloseFromCallback(t *testing.T) {
	mgr := openDomain(t, "tcp")
	var sender atomic.Pointer[endpoint.SendEndpointBuffered]
	closedInCallback := make(chan error, 1)
	rcv := newReceiver()
	rcv.onData = func(ep *endpoint.ReceiveEndpoint, _ []byte) { _ = ep.Close() }
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
	cfg := endpoint.SendConfig{
		Params:             netio.BufferedSendParams{BufferSize: 64, BufferCount: 2},
		OnConnectionClosed: func(error) { closedInCallback <- sender.Load().Close() },
	}
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), cfg)
	require.NoError(t, err)
	sender.Store(s)
	require.Equal(t, netio.OK, s.SendBuffer(s.GetBuffer(), 4))
	assert.NoError(t, recvErr(t, closedInCallback, 5*time.Second, "Close from OnConnectionClosed"))
	assert.ErrorIs(t, recvErr(t, rcv.closed, time.Second, "receiver closed"), netio.ErrClosed)
	assert.NoError(t, s.Close())
}

func TestManyConnectionsShareTheListenerPoller(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{BufferSize: 64, BufferCount: 8}))
	const conns, each = 8, 100
	var eps []*endpoint.SendEndpointBuffered
	for range conns {
		eps = append(eps, dial(t, mgr, l.Addr(), newSender(8).config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 8})))
	}
	for i := range each {
		for _, s := range eps {
			var buf *sendbuf.NetworkBuffer
			waitFor(t, 5*time.Second, func() bool { buf = s.GetBuffer(); return buf != nil }, "a buffer")
			require.Equal(t, netio.OK, s.SendBuffer(buf, i%64))
		}
	}
	waitFor(t, 20*time.Second, func() bool { return rcv.count.Load() == conns*each }, "every message")
	assert.Equal(t, int32(conns), rcv.est.Load())
	assert.Len(t, l.Connections(), conns)
	assert.Equal(t, uint64(conns), l.Accepted())
}

// TestManagerCloseWaitsForCloseFromCallback: an endpoint closed from its
// own callback finishes closing (its poller's queues) only when the
// callback returns. The manager's Close, called while that callback still
// runs, waits for it instead of failing with "device or resource busy".
// The callback holds on until the manager's Close has begun, so without
// the wait the queues are open when the domain closes, every run.
func TestManagerCloseWaitsForCloseFromCallback(t *testing.T) {
	for _, kind := range []string{"buffered", "zero-copy"} {
		t.Run(kind, func(t *testing.T) {
			mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
			require.NoError(t, err)
			l, err := endpoint.Listen(mgr, "127.0.0.1:0", newReceiver().config(netio.ReceiveParams{}))
			require.NoError(t, err)

			var closeSelf atomic.Pointer[func() error]
			closedSelf := make(chan error, 1)
			mgrClosing := make(chan struct{})
			onCompleted := func(uint64, netio.Status) {
				if fn := closeSelf.Swap(nil); fn != nil {
					closedSelf <- (*fn)()
					<-mgrClosing                      // the manager's Close has begun
					time.Sleep(50 * time.Millisecond) // and tried the domain meanwhile
				}
			}
			var send func() netio.Status
			switch kind {
			case "buffered":
				s, err := endpoint.Dial(testCtx(t), mgr, l.Addr(), endpoint.SendConfig{OnSendCompleted: onCompleted})
				require.NoError(t, err)
				closeFn := s.Close
				closeSelf.Store(&closeFn)
				send = func() netio.Status { return s.SendBuffer(s.GetBuffer(), 8) }
			case "zero-copy":
				z, err := endpoint.DialZeroCopy(testCtx(t), mgr, l.Addr(), endpoint.ZeroCopyConfig{OnSendCompleted: onCompleted})
				require.NoError(t, err)
				closeFn := z.Close
				closeSelf.Store(&closeFn)
				data := make([]byte, 8)
				send = func() netio.Status { return z.Send(nil, data, 1) }
			}
			require.Equal(t, netio.OK, send())
			assert.NoError(t, recvErr(t, closedSelf, 5*time.Second, "Close from OnSendCompleted"))
			require.NoError(t, l.Close())
			close(mgrClosing)
			assert.NoError(t, mgr.Close(), "the manager waits for the endpoint closed from its callback")
		})
	}
}
