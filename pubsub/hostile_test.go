package pubsub_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pubsub"
)

// rawControl connects to a publisher's subscription port, sends lines as
// they are, and returns the answer line, or "" when the connection
// closed without one.
func rawControl(t *testing.T, addr string, send string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if send != "" {
		_, err = c.Write([]byte(send))
		require.NoError(t, err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// answerKind parses an answer and returns its op ("" when none).
func answerKind(t *testing.T, line string) string {
	t.Helper()
	if line == "" {
		return ""
	}
	r, err := pubsub.ParseResponse([]byte(line))
	require.NoError(t, err, "answer %q", line)
	return r.Op
}

// TestHostileControl: malformed and hostile control messages are refused
// and counted, connections beyond MaxSubscribers are refused, and the
// publisher keeps serving a good subscriber throughout, exactly.
func TestHostileControl(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			// The hello timeout is not what this test checks (see
			// TestHelloTimeout): a line of 1 MiB may take longer than
			// a short one to arrive on a loaded machine, and must
			// still be answered.
			p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1, 2}, HelloTimeout: time.Minute,
				MaxSubscribers: 8})
			col := newCollector()
			sub := newSubscriber(t, mgr, col.config(p.Addr()))
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
			buf := make([]byte, 64)
			var seq uint64
			deadline := time.Now().Add(30 * time.Second)
			publishSome := func() {
				for range 100 {
					require.Equal(t, pubsub.OK, publishAll(t, p, 1, buf, seq, deadline))
					seq++
				}
			}
			publishSome()

			hello := func(data string, bufsize int) string {
				return `{"v":1,"op":"hello","id":1,"data":"` + data + `","token":7,"bufsize":` + itoa(bufsize) + "}\n"
			}
			malformed := []string{
				"hello world\n",
				"\x00\x01\x02\xff\n",
				`{"v":2,"op":"hello","id":1,"data":"127.0.0.1:1","token":1,"bufsize":65536}` + "\n",
				`{"v":1,"op":"hello","id":1}` + "\n",
				`{"v":1,"op":"dance","id":1}` + "\n",
				`{"v":1,"op":"subscribe","id":1,"tags":[-1]}` + "\n",
				`{"v":1,"op":"subscribe","id":1,"tags":[1.5]}` + "\n",
				`{"v":1,"op":"subscribe","id":1,"tags":[18446744073709551616]}` + "\n",
				`{"v":1,"op":"subscribe","id":1,"tags":[]}` + "\n",
				`{"v":1,"op":"subscribe","id":1,"tags":[1]} {"v":1}` + "\n",
				`{"v":1,"op":"hello","id":1,"data":"localhost:80","token":1,"bufsize":65536}` + "\n",
				`[1,2,3]` + "\n",
				strings.Repeat("[", 100000) + "\n",
				strings.Repeat("x", pubsub.MaxLineBytes+10), // no LF: refused once past the limit
			}
			for _, m := range malformed {
				assert.Equal(t, pubsub.OpError, answerKind(t, rawControl(t, p.Addr(), m)), "%.60q", m)
			}
			assert.Equal(t, uint64(len(malformed)), p.Stats().Malformed)

			refused := []string{
				`{"v":1,"op":"subscribe","id":3,"tags":[1]}` + "\n",         // before hello
				hello("10.254.254.254:5000", 64<<10),                        // another host
				hello("127.0.0.1:1", 64<<10),                                // nobody listens
				hello(sub.DataAddr(), 4096),                                 // buffers too small
				hello("127.0.0.1:1", 64<<10) + hello("127.0.0.1:1", 64<<10), // second hello (after a failed first)
			}
			for _, m := range refused {
				assert.Equal(t, pubsub.OpError, answerKind(t, rawControl(t, p.Addr(), m)), "%.60q", m)
			}
			assert.GreaterOrEqual(t, p.Stats().Refused, uint64(len(refused)))

			// More than MaxSubscribers are refused with an error
			// answer: the good subscriber and 7 silent connections are
			// served, 3 of 10 silent ones refused.
			const silentN, served = 10, 7
			waitFor(t, 10*time.Second, func() bool { return p.Stats().Subscribers == 1 }, "the refused sessions to end")
			var silent []net.Conn
			for range silentN {
				c, err := net.Dial("tcp", p.Addr())
				require.NoError(t, err)
				silent = append(silent, c)
			}
			waitFor(t, 10*time.Second, func() bool {
				return p.Stats().RefusedSessions == silentN-served && p.Stats().Subscribers == 1+served
			}, "%d refused sessions and %d served", silentN-served, 1+served)
			var answered int
			for _, c := range silent[served:] { // accepted in order: the last ones were refused
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				if answerKind(t, line) == pubsub.OpError {
					answered++
				}
			}
			assert.Equal(t, silentN-served, answered, "refused connections answered with an error")
			for _, c := range silent {
				c.Close()
			}
			waitFor(t, 10*time.Second, func() bool { return p.Stats().Subscribers == 1 }, "only the good subscriber left")

			// A data connection that does not open with a known HELLO is
			// closed by the subscriber and counted.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ep, err := endpoint.Dial(ctx, mgr, sub.DataAddr(), endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{}})
			cancel()
			require.NoError(t, err)
			assert.Equal(t, netio.OK, ep.SendMessage(5, []byte("not a HELLO")))
			assert.Equal(t, netio.OK, ep.Flush())
			waitFor(t, 5*time.Second, func() bool { return sub.Stats().StrayConns == 1 }, "the stray data connection")
			assert.NoError(t, ep.Close())

			publishSome()
			waitFor(t, 10*time.Second, func() bool { return col.count.Load() == int64(seq) }, "%d messages", seq)
			checkAccounted(t, col, 1, seq)
			st, _ := sub.TagStats(1)
			assert.Zero(t, st.Gaps)
			assert.Empty(t, col.problems())
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestHelloTimeout: a control connection that says nothing is closed
// without an answer once HelloTimeout has passed, and no sooner.
func TestHelloTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1}, HelloTimeout: timeout})
	start := time.Now()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	assert.Empty(t, line)
	assert.ErrorIs(t, err, io.EOF, "closed by the publisher, not by the read deadline")
	assert.GreaterOrEqual(t, time.Since(start), timeout)
	waitFor(t, 10*time.Second, func() bool { return p.Stats().Subscribers == 0 }, "the session to end")
	assert.Zero(t, p.Stats().Malformed)
}

// TestPlainPeer speaks the protocol by hand, as a C++ peer would: a TCP
// control connection with JSON lines, and a plain listener that decodes
// the coalesced format with no knowledge of pubsub. It sees the HELLO
// record with its token, a START record and the SYNC that follows it
// (docs/wire.md's worked example), then the messages; a second hello
// is refused.
func TestPlainPeer(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{42}, FirstSequence: func(uint64) uint64 { return 1000 }})
			type msg struct {
				tag    uint64
				data   string
				status uint8
			}
			got := make(chan msg, 64)
			l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
				OnMessage: func(_ *endpoint.ReceiveEndpoint, tag uint64, data []byte, status uint8) {
					select {
					case got <- msg{tag, string(data), status}:
					default:
					}
				}})
			require.NoError(t, err)
			defer func() { assert.NoError(t, l.Close()) }()

			c, err := net.Dial("tcp", p.Addr())
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(c)
			call := func(line string) pubsub.Response {
				_, err := c.Write([]byte(line + "\n"))
				require.NoError(t, err)
				ans, err := r.ReadString('\n')
				require.NoError(t, err)
				resp, err := pubsub.ParseResponse([]byte(ans))
				require.NoError(t, err, "answer %q", ans)
				return resp
			}
			resp := call(`{"v":1,"op":"hello","id":1,"data":"` + l.Addr() + `","token":77,"bufsize":65536,"policy":"drop"}`)
			assert.Equal(t, pubsub.OpAck, resp.Op)
			assert.Equal(t, p.Instance(), resp.Instance)
			assert.Equal(t, "drop", resp.Policy)
			resp = call(`{"v":1,"op":"subscribe","id":2,"tags":[42,43]}`)
			assert.Equal(t, pubsub.Response{V: 1, Op: pubsub.OpAck, ID: 2, Tags: []uint64{42}, Next: []uint64{1000}, Refused: []uint64{43}}, resp)
			assert.Equal(t, pubsub.OK, p.PublishStatus(42, 0, []byte("first")))
			assert.Equal(t, pubsub.OK, p.PublishStatus(42, pubsub.StatusFirmwareCRC, []byte("sec"), []byte("ond")))

			want := []msg{
				{pubsub.ControlTag, string(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordHello, A: 77, B: p.Instance()})), 0},
				{pubsub.ControlTag, string(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordStart, A: 42, B: 1000})), 0},
				{pubsub.ControlTag, string(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordSync, A: 42, B: 1000})), 0},
				{42, "first", 0},
				{42, "second", pubsub.StatusFirmwareCRC},
			}
			for i, w := range want {
				select {
				case m := <-got:
					assert.Equal(t, w, m, "message %d", i)
				case <-time.After(10 * time.Second):
					t.Fatalf("message %d did not arrive", i)
				}
			}
			resp = call(`{"v":1,"op":"hello","id":3,"data":"` + l.Addr() + `","token":78,"bufsize":65536}`)
			assert.Equal(t, pubsub.OpError, resp.Op)
			assert.Equal(t, uint64(3), resp.ID)
			waitFor(t, 5*time.Second, func() bool { st, _ := p.TagStats(42); return st.Subscribers == 0 }, "the subscription to end")
		})
	}
}
