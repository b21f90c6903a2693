package endpoint_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// keyLog records the keys a send side reported, with every status.
type keyLog struct {
	mu   sync.Mutex
	keys map[uint64][]netio.Status
	n    atomic.Int64
}

func newKeyLog() *keyLog { return &keyLog{keys: map[uint64][]netio.Status{}} }

func (k *keyLog) add(key uint64, st netio.Status) {
	k.mu.Lock()
	k.keys[key] = append(k.keys[key], st)
	k.mu.Unlock()
	k.n.Add(1)
}

// statuses returns how many reports had each status.
func (k *keyLog) statuses() map[netio.Status]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[netio.Status]int{}
	for _, sts := range k.keys {
		for _, st := range sts {
			out[st]++
		}
	}
	return out
}

// echoServer is a listener whose connections send every message back on
// the same connection; its checks run on the poller goroutine and are read
// after the run.
type echoServer struct {
	sent     *keyLog
	failures atomic.Int64 // echoes that could not be sent
	conn     atomic.Pointer[endpoint.ReceiveEndpoint]
	closed   chan error
}

func (e *echoServer) config(sendBufs int) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: 4096, BufferCount: 16},
		Replies: &endpoint.ListenReplies{
			Params:          netio.BufferedSendParams{BufferSize: 4096, BufferCount: sendBufs},
			OnSendCompleted: func(_ *endpoint.ReceiveEndpoint, key uint64, st netio.Status) { e.sent.add(key, st) },
		},
		OnConnectionEstablished: func(ep *endpoint.ReceiveEndpoint) { e.conn.Store(ep) },
		OnData: func(ep *endpoint.ReceiveEndpoint, data []byte) {
			buf := ep.GetBuffer()
			if buf == nil {
				e.failures.Add(1)
				return
			}
			n := copy(buf.Bytes(), data)
			if ep.SendBuffer(buf, n) != netio.OK {
				ep.ReleaseBuffer(buf.ID())
				e.failures.Add(1)
			}
		},
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			select {
			case e.closed <- err:
			default:
			}
		},
	}
}

func newEchoServer() *echoServer { return &echoServer{sent: newKeyLog(), closed: make(chan error, 4)} }

// replyCollector keeps what came back and checks it against the pattern.
type replyCollector struct {
	pat    *testpattern.Pattern
	n      atomic.Int64
	bad    atomic.Int64
	onData func(ep *endpoint.SendEndpointBuffered, data []byte) // extra, may be nil
}

func (c *replyCollector) replies() *endpoint.DialReplies {
	return &endpoint.DialReplies{
		Params: netio.ReceiveParams{BufferSize: 4096, BufferCount: 16},
		OnReply: func(ep *endpoint.SendEndpointBuffered, data []byte) {
			if c.pat.Check(data, 0, uint64(c.n.Load())) != nil {
				c.bad.Add(1)
			}
			c.n.Add(1)
			if c.onData != nil {
				c.onData(ep, data)
			}
		},
	}
}

// sendPattern sends message seq of the pattern, of 1 + seq%1000 bytes,
// retrying while the transmit queue is full.
func sendPattern(t *testing.T, s *endpoint.SendEndpointBuffered, pat *testpattern.Pattern, seq uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := s.GetBuffer()
		if buf != nil {
			n := 1 + int(seq%1000)
			pat.Fill(buf.Bytes()[:n], 0, seq)
			st := s.SendBuffer(buf, n)
			if st == netio.OK {
				return
			}
			s.ReleaseBuffer(buf.ID())
			require.Equal(t, netio.NoResources, st, "send %d", seq)
		}
		require.True(t, time.Now().Before(deadline), "no free buffer for send %d", seq)
		time.Sleep(100 * time.Microsecond)
	}
}

// One connection both ways: every message comes back, in order and
// intact, every send on both sides is reported exactly once, OK, and the
// counters agree.
func TestRepliesEcho(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			srv := newEchoServer()
			l := listen(t, mgr, srv.config(16))
			const count = 500
			pat := testpattern.New(1000)
			col := &replyCollector{pat: pat}
			sent := newSender(count)
			cfg := sent.config(netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8})
			cfg.Replies = col.replies()
			s := dial(t, mgr, l.Addr(), cfg)
			for seq := range uint64(count) {
				// At most 8 echoes owed: the listener's 16 send buffers
				// never run out, so an echo is never dropped.
				waitFor(t, 10*time.Second, func() bool { return int64(seq)-col.n.Load() < 8 }, "echoes to catch up")
				sendPattern(t, s, pat, seq)
			}
			waitFor(t, 20*time.Second, func() bool { return col.n.Load() == count && srv.sent.n.Load() == count },
				"every echo back and reported")
			assert.Zero(t, col.bad.Load(), "replies that broke the pattern or came out of order")
			assert.Zero(t, srv.failures.Load(), "echoes that could not be sent")
			assert.Equal(t, map[netio.Status]int{netio.OK: count}, srv.sent.statuses(), "listener-side reports")
			for key := range srv.sent.keys {
				assert.Less(t, key, uint64(16), "a listener-side key that is no buffer ID")
			}
			st := s.Stats()
			assert.Equal(t, uint64(count), st.Received)
			assert.Equal(t, st.Bytes, st.ReceivedBytes, "every byte sent came back")
			assert.Zero(t, st.ReceiveErrors)
			ep := srv.conn.Load()
			require.NotNil(t, ep)
			es := ep.SendStats()
			assert.Equal(t, uint64(count), es.Sent)
			assert.Equal(t, uint64(count), es.Completed)
			assert.Equal(t, st.Bytes, es.Bytes)
			assert.Equal(t, uint64(count), ep.Stats().Messages)
		})
	}
}

// A reply larger than the dialer's reply buffers is counted and reported,
// never delivered.
func TestRepliesTooLarge(t *testing.T) {
	mgr := openDomain(t, "tcp")
	srv := newEchoServer()
	l := listen(t, mgr, srv.config(4))
	col := &replyCollector{pat: testpattern.New(4096)}
	var ended atomic.Bool
	cfg := endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 4}, Replies: col.replies(),
		OnConnectionClosed: func(error) { ended.Store(true) }}
	cfg.Replies.Params.BufferSize = 64
	s := dial(t, mgr, l.Addr(), cfg)
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 100))
	// tcp may drop the connection instead (quirks.Quirks.TruncationDrops).
	waitFor(t, 10*time.Second, func() bool { return s.Stats().ReceiveErrors > 0 || ended.Load() },
		"the oversized reply to be reported")
	assert.Zero(t, col.n.Load(), "an oversized reply reached OnReply")
}

// Whichever side closes, and from wherever, every key on both sides is
// reported exactly once, the other side learns the end, and nothing
// (registration, goroutine) is left: openDomain and TestMain check that.
func TestRepliesCloseOrders(t *testing.T) {
	cases := map[string]func(s *endpoint.SendEndpointBuffered, srv *echoServer){
		"dialer": func(s *endpoint.SendEndpointBuffered, _ *echoServer) { assert.NoError(t, s.Close()) },
		"accepted": func(_ *endpoint.SendEndpointBuffered, srv *echoServer) {
			assert.NoError(t, srv.conn.Load().Close())
		},
		"dialer twice": func(s *endpoint.SendEndpointBuffered, _ *echoServer) {
			assert.NoError(t, s.Close())
			assert.NoError(t, s.Close())
		},
	}
	for name, closeFn := range cases {
		t.Run(name, func(t *testing.T) {
			mgr := openDomain(t, "tcp")
			srv := newEchoServer()
			l := listen(t, mgr, srv.config(16))
			col := &replyCollector{pat: testpattern.New(1000)}
			sent := newSender(64)
			cfg := sent.config(netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8})
			cfg.Replies = col.replies()
			s := dial(t, mgr, l.Addr(), cfg)
			for seq := range uint64(50) {
				sendPattern(t, s, col.pat, seq)
			}
			waitFor(t, 10*time.Second, func() bool { return srv.conn.Load() != nil }, "the connection")
			closeFn(s, srv)
			if name == "accepted" {
				assert.ErrorIs(t, recvErr(t, sent.closed, 10*time.Second, "dialer's OnConnectionClosed"), netio.ErrConnectionClosed)
			} else {
				assert.ErrorIs(t, recvErr(t, sent.closed, 10*time.Second, "dialer's OnConnectionClosed"), netio.ErrClosed)
			}
			assert.Error(t, recvErr(t, srv.closed, 10*time.Second, "listener's OnConnectionClosed"))
			ep := srv.conn.Load()
			es := ep.SendStats()
			assert.Equal(t, es.Sent, es.Completed+es.Failed, "every echo reported")
			assert.Equal(t, int64(es.Sent), srv.sent.n.Load(), "each echo key reported once")
			byStatus := srv.sent.statuses()
			assert.Equal(t, int(es.Completed), byStatus[netio.OK], "echoes reported OK")
			assert.Equal(t, int(es.Failed), byStatus[netio.Failed]+byStatus[netio.Canceled], "echoes reported failed or canceled")
			assert.Nil(t, ep.GetBuffer(), "a buffer from a closed connection")
			ss := s.Stats()
			assert.Equal(t, ss.Sent, ss.Completed+ss.Failed, "every ping reported")
		})
	}
}

// OnReply may close its endpoint: the data stays readable until it
// returns and nothing more is delivered.
func TestRepliesCloseFromOnReply(t *testing.T) {
	mgr := openDomain(t, "tcp")
	srv := newEchoServer()
	cfg := srv.config(16)
	// Both pings are sent before the first reply can close: the server
	// holds the first ping's echo until the second ping has arrived, then
	// echoes both. (Its OnData runs on its poller goroutine only.)
	echo, first := cfg.OnData, []byte(nil)
	cfg.OnData = func(ep *endpoint.ReceiveEndpoint, data []byte) {
		if first == nil {
			first = append([]byte{}, data...)
			return
		}
		echo(ep, first)
		echo(ep, data)
	}
	l := listen(t, mgr, cfg)
	col := &replyCollector{pat: testpattern.New(1000)}
	var afterClose atomic.Int64
	col.onData = func(ep *endpoint.SendEndpointBuffered, data []byte) {
		assert.NoError(t, ep.Close())
		afterClose.Add(int64(len(data))) // reading data after Close must be safe
		_ = data[len(data)-1]
	}
	sent := newSender(64)
	scfg := sent.config(netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8})
	scfg.Replies = col.replies()
	s := dial(t, mgr, l.Addr(), scfg)
	for seq := range uint64(2) {
		buf := s.GetBuffer()
		require.NotNil(t, buf)
		col.pat.Fill(buf.Bytes()[:10], 0, seq)
		require.Equal(t, netio.OK, s.SendBuffer(buf, 10))
	}
	assert.ErrorIs(t, recvErr(t, sent.closed, 10*time.Second, "OnConnectionClosed"), netio.ErrClosed)
	waitFor(t, 10*time.Second, func() bool { return srv.sent.n.Load() == 2 }, "both echoes reported")
	time.Sleep(20 * time.Millisecond) // room for a wrong second delivery
	assert.Equal(t, int64(1), col.n.Load(), "replies delivered after OnReply closed the endpoint")
	assert.Equal(t, int64(10), afterClose.Load())
	assert.Nil(t, s.GetBuffer(), "a buffer from a closed endpoint")
}

// Bad input is refused with a clear error or status and changes nothing.
func TestRepliesBadInput(t *testing.T) {
	mgr := openDomain(t, "tcp")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := endpoint.Dial(ctx, mgr, "127.0.0.1:1", endpoint.SendConfig{Replies: &endpoint.DialReplies{}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "replies without OnReply")
	bad := &endpoint.DialReplies{Params: netio.ReceiveParams{BufferSize: -1}, OnReply: func(*endpoint.SendEndpointBuffered, []byte) {}}
	_, err = endpoint.Dial(ctx, mgr, "127.0.0.1:1", endpoint.SendConfig{Replies: bad})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "negative reply buffer size")
	assert.Equal(t, -1, bad.Params.BufferSize, "the caller's config changed")
	_, err = endpoint.DialReconnecting(mgr, "127.0.0.1:1", endpoint.ReconnectConfig{Send: endpoint.SendConfig{
		Replies: &endpoint.DialReplies{OnReply: func(*endpoint.SendEndpointBuffered, []byte) {}}}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "replies on a reconnecting sender")
	_, err = endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {},
		Replies: &endpoint.ListenReplies{Params: netio.BufferedSendParams{BufferCount: -3}}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "negative send buffer count")

	// A listener without Replies: its connections cannot send.
	plain := newReceiver()
	var got atomic.Pointer[endpoint.ReceiveEndpoint]
	plainCfg := plain.config(netio.ReceiveParams{})
	plainCfg.OnConnectionEstablished = func(ep *endpoint.ReceiveEndpoint) { got.Store(ep) }
	l1 := listen(t, mgr, plainCfg)
	s1 := dial(t, mgr, l1.Addr(), endpoint.SendConfig{})
	waitFor(t, 10*time.Second, func() bool { return got.Load() != nil }, "the plain connection")
	ep1 := got.Load()
	assert.Nil(t, ep1.GetBuffer())
	foreign := s1.GetBuffer()
	require.NotNil(t, foreign)
	assert.Equal(t, netio.InvalidArgument, ep1.SendBuffer(foreign, 1))
	_, st := ep1.ReleaseBuffer(0)
	assert.Equal(t, netio.InvalidArgument, st)
	assert.Zero(t, ep1.SendStats())

	// A listener with Replies: foreign buffers, bad sizes and double
	// releases are refused.
	srv := newEchoServer()
	l2 := listen(t, mgr, srv.config(4))
	dial(t, mgr, l2.Addr(), endpoint.SendConfig{})
	waitFor(t, 10*time.Second, func() bool { return srv.conn.Load() != nil }, "the connection")
	ep2 := srv.conn.Load()
	assert.Equal(t, netio.InvalidArgument, ep2.SendBuffer(nil, 1))
	assert.Equal(t, netio.InvalidArgument, ep2.SendBuffer(foreign, 1), "a buffer of another endpoint")
	buf := ep2.GetBuffer()
	require.NotNil(t, buf)
	assert.Equal(t, netio.InvalidArgument, ep2.SendBuffer(buf, buf.Size()+1))
	assert.Equal(t, netio.InvalidArgument, ep2.SendBuffer(buf, -1))
	_, st = ep2.ReleaseBuffer(buf.ID())
	assert.Equal(t, netio.OK, st)
	_, st = ep2.ReleaseBuffer(buf.ID())
	assert.Equal(t, netio.InvalidArgument, st, "released twice")
	assert.Equal(t, netio.InvalidArgument, ep2.SendBuffer(buf, 1), "a released buffer")
	_, st = ep2.ReleaseBuffer(1 << 40)
	assert.Equal(t, netio.InvalidArgument, st)
	assert.Zero(t, ep2.SendStats().Sent, "refused sends were counted")
	s1.ReleaseBuffer(foreign.ID())
}
