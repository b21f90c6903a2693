package endpoint_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/sendbuf"
)

// stalledReplyConfig is a ListenReplies with ProgressTimeout on a
// listener that keeps the accepted connection in conn and its close
// reason in closed; sent logs every OnSendCompleted.
func stalledReplyConfig(timeout time.Duration, conn chan<- *endpoint.ReceiveEndpoint, closed chan<- error, sent *keyLog) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Replies: &endpoint.ListenReplies{
			Params:          netio.BufferedSendParams{BufferSize: 1 << 20, BufferCount: 32},
			ProgressTimeout: timeout,
			OnSendCompleted: func(_ *endpoint.ReceiveEndpoint, key uint64, st netio.Status) { sent.add(key, st) },
		},
		OnData:                  func(*endpoint.ReceiveEndpoint, []byte) {},
		OnConnectionEstablished: func(ep *endpoint.ReceiveEndpoint) { conn <- ep },
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			select { // callbacks must not block: keep the first
			case closed <- err:
			default:
			}
		},
	}
}

// accepted waits for the listener's connection.
func accepted(t *testing.T, conn <-chan *endpoint.ReceiveEndpoint) *endpoint.ReceiveEndpoint {
	t.Helper()
	select {
	case ep := <-conn:
		return ep
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

// bufferSender is what the send side of a dialled and of an accepted
// connection have in common.
type bufferSender interface {
	GetBuffer() *sendbuf.NetworkBuffer
	SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status
	ReleaseBuffer(id uint64) (uint64, netio.Status)
}

// fillPending sends full buffers on ep until every buffer is pending
// behind a stalled peer (no free buffer for a while), the connection is
// closed, or 5 s pass, and returns how many were posted.
func fillPending(ep bufferSender) int {
	sent, refused, idle := 0, 0, 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && refused+idle < 100; {
		buf := ep.GetBuffer()
		if buf == nil {
			idle++
			time.Sleep(time.Millisecond)
			continue
		}
		idle = 0
		if st := ep.SendBuffer(buf, buf.Size()); st != netio.OK {
			ep.ReleaseBuffer(buf.ID())
			refused++
			time.Sleep(time.Millisecond)
			continue
		}
		sent++
	}
	return sent
}

// A dialer whose OnReply hangs stops taking replies (its poller drives
// tcp's progress): ListenReplies.ProgressTimeout ends the accepted
// connection with ErrTimeout and reports every reply exactly once.
func TestListenRepliesProgressTimeout(t *testing.T) {
	srvMgr, cliMgr := openDomain(t, "tcp"), openDomain(t, "tcp")
	conn, closed := make(chan *endpoint.ReceiveEndpoint, 1), make(chan error, 1)
	sent := newKeyLog()
	l := listen(t, srvMgr, stalledReplyConfig(200*time.Millisecond, conn, closed, sent))

	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	dial(t, cliMgr, l.Addr(), endpoint.SendConfig{Replies: &endpoint.DialReplies{
		Params:  netio.ReceiveParams{BufferSize: 1 << 20, BufferCount: 4},
		OnReply: func(*endpoint.SendEndpointBuffered, []byte) { <-gate },
	}})
	t.Cleanup(release) // before the dialer's Close, which waits for OnReply

	ep := accepted(t, conn)
	n := fillPending(ep)
	t.Logf("%d replies posted before the stall", n)
	err := recvErr(t, closed, 10*time.Second, "reply progress timeout")
	assert.ErrorIs(t, err, netio.ErrTimeout)
	assert.ErrorIs(t, err, netio.ErrConnectionClosed)

	sts := sent.statuses()
	assert.Positive(t, sts[netio.Canceled], "replies pending at the stall are reported Canceled")
	assert.Equal(t, int64(n), sent.n.Load(), "every reply reported once")
	s := ep.SendStats()
	assert.Equal(t, s.Sent, s.Completed+s.Failed)
	assert.Nil(t, ep.GetBuffer(), "the connection is closed")
}

// A connection with nothing pending is never ended by ProgressTimeout.
func TestListenRepliesProgressTimeoutSparesIdle(t *testing.T) {
	mgr := openDomain(t, "tcp")
	conn, closed := make(chan *endpoint.ReceiveEndpoint, 1), make(chan error, 1)
	sent := newKeyLog()
	l := listen(t, mgr, stalledReplyConfig(20*time.Millisecond, conn, closed, sent))
	got := make(chan struct{}, 4)
	dial(t, mgr, l.Addr(), endpoint.SendConfig{Replies: &endpoint.DialReplies{
		Params:  netio.ReceiveParams{BufferSize: 1 << 20, BufferCount: 4},
		OnReply: func(*endpoint.SendEndpointBuffered, []byte) { got <- struct{}{} },
	}})
	ep := accepted(t, conn)
	for range 2 {
		buf := ep.GetBuffer()
		require.NotNil(t, buf)
		require.Equal(t, netio.OK, ep.SendBuffer(buf, 10))
		<-got
		time.Sleep(200 * time.Millisecond) // ten timeouts with nothing pending
	}
	select {
	case err := <-closed:
		t.Fatalf("idle connection closed: %v", err)
	default:
	}
}

func TestListenRepliesNegativeProgressTimeout(t *testing.T) {
	mgr := openDomain(t, "tcp")
	_, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		OnData:  func(*endpoint.ReceiveEndpoint, []byte) {},
		Replies: &endpoint.ListenReplies{ProgressTimeout: -time.Second},
	})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}
