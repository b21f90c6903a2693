package endpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// never is a flush interval no test outlives: buffers go out only when full,
// on Flush or on Close.
const never = time.Hour

// coMsg is one decoded message.
type coMsg struct {
	Tag    uint64
	Status uint8
	Data   string
}

// msgSink collects what a coalescing listener delivers.
type msgSink struct {
	mu   sync.Mutex
	msgs []coMsg
	errs []error
	n    atomic.Int64
	// onMessage, when set, runs after the message is recorded.
	onMessage func(ep *endpoint.ReceiveEndpoint, n int64)
}

func (m *msgSink) config(p netio.ReceiveParams) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Params: p,
		OnMessage: func(ep *endpoint.ReceiveEndpoint, tag uint64, data []byte, status uint8) {
			m.mu.Lock()
			m.msgs = append(m.msgs, coMsg{tag, status, string(data)})
			m.mu.Unlock()
			n := m.n.Add(1)
			if m.onMessage != nil {
				m.onMessage(ep, n)
			}
		},
		OnReceiveError: func(_ *endpoint.ReceiveEndpoint, err error) {
			m.mu.Lock()
			m.errs = append(m.errs, err)
			m.mu.Unlock()
		},
	}
}

func (m *msgSink) messages() []coMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]coMsg(nil), m.msgs...)
}

func (m *msgSink) errors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}

// await waits until n messages arrived, for as long as they keep arriving
// (awaitProgress).
func (m *msgSink) await(t *testing.T, n int) []coMsg {
	t.Helper()
	awaitProgress(t, fmt.Sprintf("%d messages", n), m.n.Load, func() bool { return m.n.Load() >= int64(n) })
	return m.messages()
}

// coalescingPair listens with sink and dials a sender with cfg; a nil
// cfg.Coalesce is given FlushInterval never.
func coalescingPair(t *testing.T, prov string, sink *msgSink, cfg endpoint.SendConfig) (*endpoint.Listener, *endpoint.SendEndpointBuffered) {
	t.Helper()
	mgr := openDomain(t, prov)
	l := listen(t, mgr, sink.config(netio.ReceiveParams{BufferCount: 64}))
	if cfg.Coalesce == nil {
		cfg.Coalesce = &endpoint.CoalesceConfig{FlushInterval: never}
	}
	return l, dial(t, mgr, l.Addr(), cfg)
}

// retry calls send until it returns something other than NoResources.
func retry(t *testing.T, send func() netio.Status) netio.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := send()
		if st != netio.NoResources || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// conn returns the listener's only connection.
func conn(t *testing.T, l *endpoint.Listener) *endpoint.ReceiveEndpoint {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool { return len(l.Connections()) == 1 }, "the connection")
	return l.Connections()[0]
}

// payload is n bytes that depend on i.
func payload(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*7 + j)
	}
	return b
}

func TestCoalesceRoundTrip(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			l, s := coalescingPair(t, prov, sink, endpoint.SendConfig{
				Params: netio.BufferedSendParams{BufferSize: 1024, BufferCount: 8}})
			const n = 600
			var want []coMsg
			for i := range n {
				m := coMsg{Tag: uint64(i / 3), Data: string(payload(i, i%70))} // tags change, some payloads empty
				if i%5 == 0 {
					m.Status = uint8(i)
				}
				data := []byte(m.Data)
				var st netio.Status
				switch i % 4 {
				case 0:
					st = retry(t, func() netio.Status { return s.SendMessageStatus(m.Tag, m.Status, data) })
				case 1: // scatter-gather, an empty part included
					m.Status = 0
					parts := [][]byte{data[:len(data)/3], nil, data[len(data)/3:]}
					st = retry(t, func() netio.Status { return s.SendMessageV(m.Tag, parts) })
				case 2:
					m.Status = 0
					st = retry(t, func() netio.Status { return s.SendMessage(m.Tag, data) })
				case 3: // scatter-gather with a status
					half := len(data) / 2
					st = retry(t, func() netio.Status { return s.SendMessageStatus(m.Tag, m.Status, data[:half], data[half:]) })
				}
				require.Equal(t, netio.OK, st, "message %d", i)
				want = append(want, m)
			}
			require.Equal(t, netio.OK, retry(t, s.Flush))

			assert.Equal(t, want, sink.await(t, n))
			cs := s.CoalesceStats()
			assert.EqualValues(t, n, cs.Messages)
			assert.Zero(t, cs.Pending)
			assert.EqualValues(t, 1, cs.ExplicitFlushes)
			assert.Equal(t, cs.FullFlushes+1, cs.Buffers)
			assert.Greater(t, cs.FullFlushes, uint64(20), "600 messages of ~40 bytes fill about 25 buffers of 1 KiB")
			assert.Zero(t, cs.IntervalFlushes+cs.CloseFlushes+cs.Dropped)
			assert.Equal(t, cs.Buffers, s.Stats().Sent, "one send per coalesced buffer")
			waitFor(t, 10*time.Second, func() bool { return s.Stats().Completed == cs.Buffers }, "every completion")

			rs := conn(t, l).Stats()
			assert.Equal(t, cs.Buffers, rs.Messages, "one received message per buffer")
			assert.EqualValues(t, n, rs.CoalescedMessages)
			assert.Zero(t, rs.MalformedBuffers)
			assert.Empty(t, sink.errors())
		})
	}
}

// With 256-byte buffers and 50-byte payloads a buffer holds 4 messages:
// 4+8+50 for the first, 4+50 for each next one, 224 bytes in all.
func TestCoalesceFlushWhenFull(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			l, s := coalescingPair(t, prov, sink, endpoint.SendConfig{
				Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 4}})
			for i := range 10 {
				require.Equal(t, netio.OK, s.SendMessage(7, payload(i, 50)), "message %d", i)
			}
			cs := s.CoalesceStats()
			assert.EqualValues(t, 2, cs.FullFlushes, "the 5th and the 9th message did not fit")
			assert.EqualValues(t, 2, cs.Pending)

			c := conn(t, l)
			// Wait for the messages, not for the buffer count: a buffer is
			// counted before its messages are delivered.
			waitFor(t, 10*time.Second, func() bool { return len(sink.messages()) >= 8 }, "two buffers' messages")
			assert.EqualValues(t, 2, c.Stats().Messages, "two buffers")
			got := sink.messages()
			require.Len(t, got, 8, "the two full buffers, not the pending messages")
			for i, m := range got {
				assert.Equal(t, coMsg{7, 0, string(payload(i, 50))}, m)
			}

			require.Equal(t, netio.OK, s.Flush())
			assert.Len(t, sink.await(t, 10), 10)
			assert.Equal(t, endpoint.CoalesceStats{Messages: 10, Bytes: 500, Buffers: 3, FullFlushes: 2, ExplicitFlushes: 1},
				s.CoalesceStats())
		})
	}
}

func TestCoalesceFlushInterval(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			_, s := coalescingPair(t, prov, sink, endpoint.SendConfig{
				Coalesce: &endpoint.CoalesceConfig{FlushInterval: 2 * time.Millisecond}})
			for i := range 3 {
				require.Equal(t, netio.OK, s.SendMessage(1, payload(i, 10)))
			}
			assert.Len(t, sink.await(t, 3), 3, "posted without Flush")
			assert.EqualValues(t, 1, s.CoalesceStats().IntervalFlushes)

			require.Equal(t, netio.OK, s.SendMessageStatus(2, 9, []byte("late")))
			got := sink.await(t, 4)
			assert.Equal(t, coMsg{2, 9, "late"}, got[3])
			cs := s.CoalesceStats()
			assert.EqualValues(t, 2, cs.IntervalFlushes, "the timer runs again for the next buffer")
			assert.Zero(t, cs.FullFlushes+cs.ExplicitFlushes+cs.Pending)
		})
	}
}

func TestCoalesceFlushExplicit(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			l, s := coalescingPair(t, prov, sink, endpoint.SendConfig{})
			require.Equal(t, netio.OK, s.Flush(), "nothing to flush")
			assert.Zero(t, s.CoalesceStats().Buffers)

			for i := range 3 {
				require.Equal(t, netio.OK, s.SendMessage(uint64(i), nil))
			}
			require.Equal(t, netio.OK, s.Flush())
			assert.Equal(t, []coMsg{{0, 0, ""}, {1, 0, ""}, {2, 0, ""}}, sink.await(t, 3))
			require.Equal(t, netio.OK, s.Flush(), "nothing left")
			assert.Equal(t, endpoint.CoalesceStats{Messages: 3, Buffers: 1, ExplicitFlushes: 1}, s.CoalesceStats())
			assert.EqualValues(t, 1, conn(t, l).Stats().Messages)
		})
	}
}

func TestCoalesceTooLarge(t *testing.T) {
	sink := &msgSink{}
	_, s := coalescingPair(t, "tcp", sink, endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 4}})
	require.Equal(t, netio.OK, s.SendMessage(1, []byte("first")))
	before := s.CoalesceStats()

	maxLen := 256 - coalesce.Overhead(0, true) // 244
	big := payload(0, maxLen+1)
	assert.Equal(t, netio.InvalidArgument, s.SendMessage(2, big))
	assert.Equal(t, netio.InvalidArgument, s.SendMessageStatus(2, 1, big[:maxLen]), "a status byte makes it one too many")
	assert.Equal(t, netio.InvalidArgument, s.SendMessageV(2, [][]byte{big[:200], big[200:]}))
	assert.Equal(t, before, s.CoalesceStats(), "nothing changed")
	assert.Equal(t, 3, s.NumAvailableBuffers(), "no buffer taken besides the current one")

	require.Equal(t, netio.OK, s.SendMessage(2, big[:maxLen]), "the largest message fits an empty buffer")
	require.Equal(t, netio.OK, s.Flush())
	assert.Equal(t, []coMsg{{1, 0, "first"}, {2, 0, string(big[:maxLen])}}, sink.await(t, 2))
	assert.EqualValues(t, 1, s.CoalesceStats().FullFlushes)
}

func TestCoalesceModeChecks(t *testing.T) {
	mgr := openDomain(t, "tcp")
	sink := &msgSink{}
	l := listen(t, mgr, sink.config(netio.ReceiveParams{}))

	co := dial(t, mgr, l.Addr(), endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{}})
	assert.Nil(t, co.GetBuffer(), "a coalescing endpoint owns its buffers")
	require.Equal(t, netio.OK, co.SendMessage(1, []byte("x"))) // takes buffer 0
	_, st := co.ReleaseBuffer(0)
	assert.Equal(t, netio.InvalidArgument, st, "the current buffer cannot be taken away")
	assert.EqualValues(t, 1, co.CoalesceStats().Pending)

	plain := dial(t, mgr, l.Addr(), endpoint.SendConfig{})
	buf := plain.GetBuffer()
	require.NotNil(t, buf)
	assert.Equal(t, netio.InvalidArgument, co.SendBuffer(buf, 1))
	assert.Equal(t, netio.InvalidArgument, plain.SendMessage(1, []byte("x")), "not coalescing")
	assert.Equal(t, netio.InvalidArgument, plain.SendMessageV(1, nil))
	assert.Equal(t, netio.InvalidArgument, plain.Flush())
	assert.Equal(t, endpoint.CoalesceStats{}, plain.CoalesceStats())
	_, st = plain.ReleaseBuffer(buf.ID())
	assert.Equal(t, netio.OK, st)

	require.Equal(t, netio.OK, co.Flush())
	assert.Equal(t, []coMsg{{1, 0, "x"}}, sink.await(t, 1))

	_, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Coalesce: &endpoint.CoalesceConfig{FlushInterval: -time.Millisecond}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, ln.Close()) // nobody listens there: the dial fails after the flusher started
	_, err = endpoint.Dial(context.Background(), mgr, ln.Addr().String(), endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{}})
	assert.ErrorIs(t, err, netio.ErrConnectionRefused, "and TestMain finds no flusher left")
	onData := func(*endpoint.ReceiveEndpoint, []byte) {}
	both := sink.config(netio.ReceiveParams{})
	both.OnData = onData
	_, err = endpoint.Listen(mgr, "127.0.0.1:0", both)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "OnData and OnMessage")
	_, err = endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "neither OnData nor OnMessage")
}

// With two 256-byte buffers of two 100-byte messages each, and the sender's
// poller held inside the first completion callback, at most three buffers
// can be filled before SendMessage runs out of buffers.
func TestCoalesceNoResources(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			gate := make(chan struct{})
			var openGate sync.Once
			var first atomic.Bool
			sink := &msgSink{}
			_, s := coalescingPair(t, prov, sink, endpoint.SendConfig{
				Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 2},
				OnSendCompleted: func(uint64, netio.Status) {
					if first.CompareAndSwap(false, true) {
						<-gate
					}
				},
			})
			t.Cleanup(func() { openGate.Do(func() { close(gate) }) }) // before the sender's Close

			const n = 40
			sent := 0
			for ; sent < n; sent++ {
				st := s.SendMessage(uint64(sent), payload(sent, 100))
				if st == netio.NoResources {
					break
				}
				require.Equal(t, netio.OK, st)
			}
			require.Less(t, sent, 7, "every buffer in flight")
			cs := s.CoalesceStats()
			assert.EqualValues(t, sent, cs.Messages, "the refused message was not taken")
			assert.Zero(t, cs.Pending, "the full buffer was posted before the refusal")

			openGate.Do(func() { close(gate) })
			for ; sent < n; sent++ {
				require.Equal(t, netio.OK, retry(t, func() netio.Status { return s.SendMessage(uint64(sent), payload(sent, 100)) }))
			}
			require.Equal(t, netio.OK, retry(t, s.Flush))
			got := sink.await(t, n)
			require.Len(t, got, n)
			for i, m := range got {
				assert.Equal(t, coMsg{uint64(i), 0, string(payload(i, 100))}, m, "each message once, in order")
			}
		})
	}
}

func TestCoalesceConcurrentSenders(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			_, s := coalescingPair(t, prov, sink, endpoint.SendConfig{
				Params:   netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16},
				Coalesce: &endpoint.CoalesceConfig{}, // the default interval, racing the senders
			})
			const senders, each = 4, 1500
			var wg sync.WaitGroup
			for g := range senders {
				wg.Go(func() {
					var msg [12]byte
					for seq := range each {
						binary.LittleEndian.PutUint32(msg[:], uint32(g))
						binary.LittleEndian.PutUint64(msg[4:], uint64(seq))
						st := retry(t, func() netio.Status { return s.SendMessageV(uint64(g), [][]byte{msg[:4], msg[4:]}) })
						if !assert.Equal(t, netio.OK, st) {
							return
						}
					}
				})
			}
			wg.Wait()
			require.Equal(t, netio.OK, retry(t, s.Flush))

			got := sink.await(t, senders*each)
			require.Len(t, got, senders*each)
			next := make([]uint64, senders)
			for _, m := range got {
				require.Len(t, m.Data, 12)
				g := binary.LittleEndian.Uint32([]byte(m.Data))
				seq := binary.LittleEndian.Uint64([]byte(m.Data[4:]))
				require.Less(t, g, uint32(senders))
				assert.EqualValues(t, g, m.Tag)
				assert.Equal(t, next[g], seq, "sender %d: every message once, in its order", g)
				next[g] = seq + 1
			}
			assert.EqualValues(t, senders*each, s.CoalesceStats().Messages)
		})
	}
}

func TestCoalesceCloseFlushesPending(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			snd := newSender(4)
			_, s := coalescingPair(t, prov, sink, snd.config(netio.BufferedSendParams{}))
			for i := range 3 {
				require.Equal(t, netio.OK, s.SendMessage(5, payload(i, 8)))
			}
			require.NoError(t, s.Close())

			assert.Equal(t, endpoint.CoalesceStats{Messages: 3, Bytes: 24, Buffers: 1, CloseFlushes: 1}, s.CoalesceStats())
			snd.mu.Lock()
			assert.Len(t, snd.statuses, 1, "the flushed buffer's key is reported")
			for key, sts := range snd.statuses {
				assert.Len(t, sts, 1, "key %d reported once", key)
				assert.Contains(t, []netio.Status{netio.OK, netio.Canceled}, sts[0])
			}
			snd.mu.Unlock()
			assert.Equal(t, netio.Closed, s.SendMessage(5, nil))
			assert.Equal(t, netio.Closed, s.Flush())
			if prov == "tcp" { // tcp writes a send to the socket at once, before the close
				assert.Len(t, sink.await(t, 3), 3)
			}
		})
	}
}

// syncBuffer is a log destination safe for the poller goroutine to write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestCoalesceConnectionLostDropsPending(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			var logs syncBuffer
			sink := &msgSink{}
			snd := newSender(4)
			cfg := snd.config(netio.BufferedSendParams{})
			cfg.Logger = zerolog.New(&logs)
			l, s := coalescingPair(t, prov, sink, cfg)
			for i := range 3 {
				require.Equal(t, netio.OK, s.SendMessage(5, payload(i, 8)))
			}
			require.NoError(t, l.Close())
			assert.ErrorIs(t, recvErr(t, snd.closed, 10*time.Second, "connection closed"), netio.ErrConnectionClosed)

			assert.Equal(t, endpoint.CoalesceStats{Messages: 3, Bytes: 24, Dropped: 3}, s.CoalesceStats())
			assert.Contains(t, logs.String(), `"messages":3`)
			assert.Contains(t, logs.String(), "coalesced messages dropped")
			assert.Equal(t, netio.Closed, s.SendMessage(5, nil))
			assert.Equal(t, netio.Closed, s.Flush())
			require.NoError(t, s.Close())
			assert.EqualValues(t, 3, s.CoalesceStats().Dropped, "Close has nothing more to post or drop")
			assert.Empty(t, sink.messages())
		})
	}
}

// sendRaw sends b as one message from a non-coalescing endpoint.
func sendRaw(t *testing.T, s *endpoint.SendEndpointBuffered, b []byte) {
	t.Helper()
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, copy(buf.Bytes(), b)))
}

// rawPair listens with sink and dials a sender that does not coalesce.
func rawPair(t *testing.T, prov string, sink *msgSink) (*endpoint.Listener, *endpoint.SendEndpointBuffered) {
	t.Helper()
	mgr := openDomain(t, prov)
	l := listen(t, mgr, sink.config(netio.ReceiveParams{}))
	return l, dial(t, mgr, l.Addr(), endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8}})
}

func TestCoalesceMalformedBuffer(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			var logs syncBuffer
			sink := &msgSink{}
			mgr := openDomain(t, prov)
			cfg := sink.config(netio.ReceiveParams{})
			cfg.Logger = zerolog.New(&logs)
			l := listen(t, mgr, cfg)
			s := dial(t, mgr, l.Addr(), endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8}})

			e := coalesce.NewEncoder(make([]byte, 64))
			require.NoError(t, e.Append(3, 0, []byte("ok1")))
			require.NoError(t, e.Append(3, 4, []byte("ok2")))
			valid := e.Len()
			sendRaw(t, s, append(e.Bytes(), 0xde, 0xad)) // trailing bytes
			sendRaw(t, s, []byte{1, 0, 0, 0, 'x'})       // the first message has no tag
			sendRaw(t, s, e.Bytes()[:valid])             // a good buffer still decodes
			got := sink.await(t, 4)
			assert.Equal(t, []coMsg{{3, 0, "ok1"}, {3, 4, "ok2"}, {3, 0, "ok1"}, {3, 4, "ok2"}}, got,
				"the valid prefix of the bad buffers, then the good one")

			errs := sink.errors()
			require.Len(t, errs, 2)
			var me *coalesce.MalformedError
			require.ErrorAs(t, errs[0], &me)
			assert.ErrorIs(t, errs[0], coalesce.ErrMalformed)
			assert.Equal(t, coalesce.MalformedError{Offset: valid, Index: 2, Reason: "truncated header word: 2 of 4 bytes"}, *me)
			require.ErrorAs(t, errs[1], &me)
			assert.Equal(t, 0, me.Index)
			assert.Contains(t, me.Reason, "first message has no tag")

			c := conn(t, l)
			waitFor(t, 10*time.Second, func() bool { return c.Stats().Messages == 3 }, "three buffers")
			assert.Equal(t, endpoint.ReceiveStats{Messages: 3, Bytes: uint64(2*valid + 2 + 5), CoalescedMessages: 4, MalformedBuffers: 2},
				c.Stats())
			assert.Equal(t, 2, strings.Count(logs.String(), "malformed coalesced buffer"))
			assert.Equal(t, []*endpoint.ReceiveEndpoint{c}, l.Connections(), "the connection keeps serving")
		})
	}
}

// A buffer a netio3 peer would send (here built by hand with
// coalesce.Encoder and sent raw) decodes like one the endpoint coalesced.
func TestCoalesceRawEncoderInterop(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			sink := &msgSink{}
			_, s := rawPair(t, prov, sink)
			want := []coMsg{
				{0x0102030405060708, 0, "ABC"},
				{0x0102030405060708, 0, "hello"},
				{0x1122334455667788, 7, ""},
				{0x1122334455667788, 2, "\xff"},
			}
			buf := s.GetBuffer()
			require.NotNil(t, buf)
			e := coalesce.NewEncoder(buf.Bytes())
			for _, m := range want {
				require.NoError(t, e.Append(m.Tag, m.Status, []byte(m.Data)))
			}
			require.Equal(t, 43, e.Len(), "the worked example of docs/wire.md")
			require.Equal(t, netio.OK, s.SendBuffer(buf, e.Len()))
			assert.Equal(t, want, sink.await(t, len(want)))
		})
	}
}

func TestCoalesceCloseInOnMessage(t *testing.T) {
	closed := make(chan error, 1)
	sink := &msgSink{onMessage: func(ep *endpoint.ReceiveEndpoint, n int64) {
		if n == 2 {
			assert.NoError(t, ep.Close())
		}
	}}
	mgr := openDomain(t, "tcp")
	cfg := sink.config(netio.ReceiveParams{})
	cfg.OnConnectionClosed = func(_ *endpoint.ReceiveEndpoint, err error) { closed <- err }
	l := listen(t, mgr, cfg)
	s := dial(t, mgr, l.Addr(), endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{FlushInterval: never}})
	c := conn(t, l)
	for i := range 5 {
		require.Equal(t, netio.OK, s.SendMessage(1, payload(i, 4)))
	}
	require.Equal(t, netio.OK, s.Flush())
	assert.ErrorIs(t, recvErr(t, closed, 10*time.Second, "receiver closed"), netio.ErrClosed)
	waitFor(t, 10*time.Second, func() bool { return c.Stats().CoalescedMessages == 2 }, "the decode to end")
	assert.Len(t, sink.messages(), 2, "nothing after the Close")
}

// ExampleSendEndpointBuffered_SendMessage coalesces small messages: each
// SendMessage copies into the current send buffer, which goes out when
// full, after the flush interval, or on Flush; the listener's OnMessage
// gets every message with its tag and status.
func ExampleSendEndpointBuffered_SendMessage() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()

	got := make(chan string, 16)
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		// Runs on the poller goroutine; data is valid only during the call.
		OnMessage: func(_ *endpoint.ReceiveEndpoint, tag uint64, data []byte, status uint8) {
			got <- fmt.Sprintf("tag %d status %d: %q", tag, status, data)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Coalesce: &endpoint.CoalesceConfig{FlushInterval: time.Millisecond},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close() // posts what is still pending

	for _, st := range []netio.Status{
		s.SendMessage(1, []byte("alpha")),
		s.SendMessageV(1, [][]byte{[]byte("be"), []byte("ta")}), // scatter-gather
		s.SendMessageStatus(2, 7, []byte("gamma")),              // with a status
		s.Flush(), // post now rather than after the interval
	} {
		if st != netio.OK { // NoResources: retry after a completion
			fmt.Println(st)
			return
		}
	}
	for range 3 {
		fmt.Println(<-got)
	}
	// Output:
	// tag 1 status 0: "alpha"
	// tag 1 status 0: "beta"
	// tag 2 status 7: "gamma"
}
