package pubsub_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pubsub"
)

// handPub is the publisher's side of the protocol written by hand from
// docs/wire.md alone, as a C or C++ peer would write it: a TCP
// subscription port reading JSON lines, and a data connection dialled
// with the plain endpoint API carrying buffers whose bytes it lays out
// itself. It uses nothing of package pubsub, so what it proves about the
// subscriber holds against any publisher that follows the text. It runs
// on the test's goroutine.
type handPub struct {
	t   *testing.T
	mgr *domain.Manager
	ln  *net.TCPListener
	ctl net.Conn
	rd  *bufio.Reader
	ep  *endpoint.SendEndpointBuffered
}

// handRequest is a request line (docs/wire.md, "Requests").
type handRequest struct {
	V       int      `json:"v"`
	Op      string   `json:"op"`
	ID      uint64   `json:"id"`
	Data    string   `json:"data"`
	Token   uint64   `json:"token"`
	BufSize int      `json:"bufsize"`
	Tags    []uint64 `json:"tags"`
}

const handBufSize = 4096 // the data connection's send buffers

func newHandPub(t *testing.T, mgr *domain.Manager) *handPub {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	h := &handPub{t: t, mgr: mgr, ln: ln}
	t.Cleanup(func() {
		h.drop()
		ln.Close()
	})
	return h
}

func (h *handPub) addr() string { return h.ln.Addr().String() }

// request accepts the subscriber's control connection if there is none,
// and reads its next request, which must be op.
func (h *handPub) request(op string) handRequest {
	t := h.t
	if h.ctl == nil {
		require.NoError(t, h.ln.SetDeadline(time.Now().Add(10*time.Second)))
		c, err := h.ln.Accept()
		require.NoError(t, err, "the subscriber to connect")
		h.ctl, h.rd = c, bufio.NewReader(c)
	}
	require.NoError(t, h.ctl.SetReadDeadline(time.Now().Add(10*time.Second)))
	line, err := h.rd.ReadBytes('\n')
	require.NoError(t, err)
	var r handRequest
	require.NoError(t, json.Unmarshal(line, &r), "%q", line)
	require.Equal(t, 1, r.V, "%q", line)
	require.Equal(t, op, r.Op, "%q", line)
	require.NotZero(t, r.ID, "%q", line)
	return r
}

// answer writes one answer line.
func (h *handPub) answer(format string, args ...any) {
	_, err := fmt.Fprintf(h.ctl, format+"\n", args...)
	require.NoError(h.t, err)
}

// hello serves the subscriber's hello: dial its data address, open the
// data connection with the HELLO record, then acknowledge.
func (h *handPub) hello(instance uint64) {
	t := h.t
	r := h.request("hello")
	require.NotZero(t, r.Token)
	require.GreaterOrEqual(t, r.BufSize, handBufSize, "the subscriber's receive buffers hold ours")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep, err := endpoint.Dial(ctx, h.mgr, r.Data, endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: handBufSize, BufferCount: 4}})
	require.NoError(t, err)
	h.ep = ep
	h.send(wireRecord("NPS", 1, r.Token, instance))
	h.answer(`{"v":1,"op":"ack","id":%d,"instance":%d,"policy":"block"}`, r.ID, instance)
}

// subscribe serves a subscribe request of tag: its subscription's first
// message will be number next.
func (h *handPub) subscribe(tag, next uint64) {
	r := h.request("subscribe")
	require.Equal(h.t, []uint64{tag}, r.Tags)
	h.answer(`{"v":1,"op":"ack","id":%d,"tags":[%d],"next":[%d]}`, r.ID, tag, next)
}

// send posts one buffer: the messages, back to back.
func (h *handPub) send(msgs ...[]byte) {
	t := h.t
	var b []byte
	for _, m := range msgs {
		b = append(b, m...)
	}
	require.LessOrEqual(t, len(b), handBufSize)
	deadline := time.Now().Add(10 * time.Second)
	buf := h.ep.GetBuffer()
	for buf == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		buf = h.ep.GetBuffer()
	}
	require.NotNil(t, buf, "a free send buffer")
	copy(buf.Bytes(), b)
	st := h.ep.SendBuffer(buf, len(b))
	for st == netio.NoResources && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		st = h.ep.SendBuffer(buf, len(b))
	}
	require.Equal(t, netio.OK, st)
}

// drop ends both connections, as a publisher that dies does.
func (h *handPub) drop() {
	if h.ctl != nil {
		h.ctl.Close()
		h.ctl, h.rd = nil, nil
	}
	if h.ep != nil {
		assert.NoError(h.t, h.ep.Close())
		h.ep = nil
	}
}

// wireMessage is one message of the coalesced format (docs/wire.md,
// "Layout"): a header word with bit 31 (a tag follows) and the size, the
// tag, the payload; status 0, so no status byte.
func wireMessage(tag uint64, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 1<<31|uint32(len(payload)))
	b = binary.LittleEndian.AppendUint64(b, tag)
	return append(b, payload...)
}

// wireRecord is a control record (docs/wire.md, "Data connection"): a
// message of tag 0xFFFFFFFFFFFFFFFF whose 24 bytes are the magic, version
// 1, the kind (1 HELLO, 2 SYNC, 3 START), three zero bytes, A and B.
func wireRecord(magic string, kind byte, a, b uint64) []byte {
	p := append([]byte(magic), 1, kind, 0, 0, 0)
	p = binary.LittleEndian.AppendUint64(p, a)
	p = binary.LittleEndian.AppendUint64(p, b)
	return wireMessage(0xFFFFFFFFFFFFFFFF, p)
}

// TestHandWrittenPublisher: a publisher written from docs/wire.md alone
// (handPub) serves a subscriber, and the subscriber's fault counters
// count exactly what the text says they count: a SYNC behind the count
// is out of sequence, a record with a bad magic a bad record, a SYNC
// ahead a gap of the numbers skipped, and a restart that numbers from
// the start again a reset.
func TestHandWrittenPublisher(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			const tag = 5
			mgr := openDomain(t, prov)
			h := newHandPub(t, mgr)
			col := newCollector()
			sub := newSubscriber(t, mgr, col.config(h.addr()))
			errc := make(chan error, 1)
			ctx := ctxT(t, 20*time.Second)
			go func() { errc <- sub.Subscribe(ctx, tag) }()

			h.hello(0x1122334455667788)
			h.subscribe(tag, 100)
			require.NoError(t, <-errc)
			msg := func(seq uint64) []byte { return wireMessage(tag, payload(make([]byte, 32), tag, seq)) }
			tagStats := func() pubsub.TagStats { st, _ := sub.TagStats(tag); return st }

			// In step: START, the SYNC that follows it, messages 100-102.
			h.send(wireRecord("NPS", 3, tag, 100), wireRecord("NPS", 2, tag, 100), msg(100), msg(101), msg(102))
			waitFor(t, 10*time.Second, func() bool { return tagStats().Messages == 3 }, "messages 100-102")
			assert.Zero(t, sub.Stats().OutOfSequence+sub.Stats().BadRecords+sub.Stats().Gaps)

			// A SYNC behind the count (103): out of sequence, and the count
			// follows it; a record with a bad magic; a SYNC ahead: a gap.
			h.send(wireRecord("NPS", 2, tag, 101), msg(101), wireRecord("XPS", 2, tag, 500),
				wireRecord("NPS", 2, tag, 110), msg(110))
			waitFor(t, 10*time.Second, func() bool { return tagStats().Messages == 5 }, "messages 101 and 110")
			st := sub.Stats()
			assert.Equal(t, uint64(1), st.OutOfSequence)
			assert.Equal(t, uint64(1), st.BadRecords)
			assert.Equal(t, uint64(1), st.Gaps)
			assert.Equal(t, uint64(8), st.Missed)
			assert.Zero(t, st.Resets)
			assert.Equal(t, []pubsub.Gap{{Publisher: h.addr(), Tag: tag, First: 102, Count: 8}}, col.gapList())

			// The publisher restarts on the same port and numbers from 0
			// again: the subscriber reconnects by itself and reports a
			// reset, not a gap.
			h.drop()
			h.hello(0x99)
			h.subscribe(tag, 0)
			h.send(wireRecord("NPS", 3, tag, 0), wireRecord("NPS", 2, tag, 0), msg(0))
			waitFor(t, 10*time.Second, func() bool { return tagStats().Messages == 6 }, "message 0 after the restart")

			assert.Equal(t, []uint64{100, 101, 102, 101, 110, 0}, col.received(tag))
			assert.Empty(t, col.problems())
			assert.Equal(t, []pubsub.Gap{{Publisher: h.addr(), Tag: tag, First: 102, Count: 8},
				{Publisher: h.addr(), Tag: tag, First: 0, Reset: true}}, col.gapList())
			ts := tagStats()
			assert.Equal(t, pubsub.TagStats{Messages: 6, Bytes: 6 * 32, Gaps: 1, Missed: 8, Resets: 1, OutOfSequence: 1, NextSeq: 1}, ts)
			st = sub.Stats()
			assert.Equal(t, uint64(1), st.OutOfSequence)
			assert.Equal(t, uint64(1), st.BadRecords)
			assert.Equal(t, uint64(1), st.Resets)
			assert.Equal(t, uint64(1), st.Gaps)
			assert.Equal(t, uint64(8), st.Missed)
			assert.Equal(t, uint64(1), st.Reconnects)
			assert.Zero(t, st.Malformed+st.Unsolicited+st.StrayConns+st.Moves)
			assert.Equal(t, uint64(5), st.Buffers, "two HELLO buffers and three of data")
			assert.Equal(t, int64(1), col.lost.Load())
			// OnRestored runs on the control goroutine once it has read
			// the ack, which may be after the data came.
			waitFor(t, 10*time.Second, func() bool { return col.restored.Load() == 1 }, "OnRestored")
			assert.Equal(t, []uint64{tag}, sub.Subscribed())
		})
	}
}
