package endpoint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/testpattern"
)

// keepFirst returns a callback that keeps the first few errors in ch
// without blocking (callbacks must not block).
func keepFirst(ch chan error) func(error) {
	return func(err error) {
		select {
		case ch <- err:
		default:
		}
	}
}

// smallReplies dials an echo server with 64-byte reply buffers and sends
// one 100-byte request, so its echo is too large for them. It returns the
// endpoint, the replies delivered, and channels of OnReplyError's and
// OnConnectionClosed's errors.
func smallReplies(t *testing.T, prov string) (s *endpoint.SendEndpointBuffered, col *replyCollector, replyErrs, closed chan error) {
	mgr := openDomain(t, prov)
	l := listen(t, mgr, newEchoServer().config(4))
	col = &replyCollector{pat: testpattern.New(4096)}
	replyErrs, closed = make(chan error, 4), make(chan error, 4)
	replies := col.replies()
	replies.Params.BufferSize = 64
	keepErr := keepFirst(replyErrs)
	replies.OnReplyError = func(_ *endpoint.SendEndpointBuffered, err error) { keepErr(err) }
	s = dial(t, mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 4}, Replies: replies,
		OnConnectionClosed: keepFirst(closed)})
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 100))
	return s, col, replyErrs, closed
}

// A reply larger than the dialer's reply buffers reaches OnReplyError, and
// when tcp then drops the connection (quirks.Quirks.TruncationDrops) the
// close names the truncation, as the accepted side's does.
func TestRepliesTooLargeReported(t *testing.T) {
	s, col, replyErrs, closed := smallReplies(t, "tcp")
	err := recvErr(t, replyErrs, 10*time.Second, "the reply error")
	assert.ErrorIs(t, err, fabric.ETRUNC)
	assert.Contains(t, err.Error(), "larger than the 64-byte reply buffers")
	assert.Zero(t, col.n.Load(), "an oversized reply reached OnReply")
	assert.Equal(t, uint64(1), s.Stats().ReceiveErrors)

	err = recvErr(t, closed, 10*time.Second, "the connection closed")
	assert.ErrorIs(t, err, netio.ErrConnectionClosed)
	assert.ErrorIs(t, err, fabric.ETRUNC, "the close names the oversize reply")
	assert.Contains(t, err.Error(), "64-byte reply buffers")
}

// A local Close after a truncated reply keeps its own reason (sockets
// reports the truncation and keeps the connection).
func TestRepliesTruncationSparesLocalClose(t *testing.T) {
	s, _, replyErrs, closed := smallReplies(t, "sockets")
	select {
	case <-replyErrs:
	case err := <-closed:
		t.Skipf("the provider dropped the connection: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no reply error")
	}
	require.NoError(t, s.Close())
	err := recvErr(t, closed, 10*time.Second, "the close")
	assert.ErrorIs(t, err, netio.ErrClosed)
	assert.NotErrorIs(t, err, fabric.ETRUNC)
}
