package endpoint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/stats"
)

// An accepted connection closed with replies in flight: the sends it
// reports Canceled are in its kind's totals in the registry. The replies
// are sent and the connection closed in one OnData call, so that no
// completion can be read in between and every one of them is canceled.
func TestRepliesCanceledInTotals(t *testing.T) {
	const n = 8
	mgr := openDomain(t, "tcp")
	srv := newEchoServer()
	cfg := srv.config(n)
	cfg.OnData = func(ep *endpoint.ReceiveEndpoint, data []byte) {
		for range n {
			buf := ep.GetBuffer()
			if buf == nil {
				srv.failures.Add(1)
				continue
			}
			if ep.SendBuffer(buf, copy(buf.Bytes(), data)) != netio.OK {
				ep.ReleaseBuffer(buf.ID())
				srv.failures.Add(1)
			}
		}
		assert.NoError(t, ep.Close())
	}
	l := listen(t, mgr, cfg)
	sent := newSender(4)
	s := dial(t, mgr, l.Addr(), sent.config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 1}))
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, copy(buf.Bytes(), "ping")))
	assert.ErrorIs(t, recvErr(t, srv.closed, 10*time.Second, "listener's OnConnectionClosed"), netio.ErrClosed)
	assert.Zero(t, srv.failures.Load(), "replies not sent")
	assert.Equal(t, n, srv.sent.statuses()[netio.Canceled], "replies reported Canceled")

	var recv *stats.Kind
	for _, k := range mgr.Snapshot().Kinds {
		if k.Kind == stats.KindReceive {
			recv = &k
		}
	}
	require.NotNil(t, recv, "no receive totals")
	assert.Zero(t, recv.Live)
	assert.Equal(t, uint64(n), recv.SendsCanceled, "canceled replies in the receive totals")
	assert.Equal(t, uint64(n), recv.MessagesSent, "replies in the receive totals")
}
