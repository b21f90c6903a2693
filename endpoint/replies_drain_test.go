package endpoint_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// A listener that replies and closes as soon as its replies completed:
// the dialer drains after the shutdown, as an accepted connection does
// (quirks.Quirks.ShutdownBeforeDelivered), so every reply the accepted
// side saw completed OK reaches OnReply, intact and in order, before
// OnConnectionClosed.
func TestRepliesDrainAfterPeerClose(t *testing.T) {
	const n = 16
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			pat := testpattern.New(4096)
			var ok, failed, repliedAtClose atomic.Int64
			col := &replyCollector{pat: pat}
			srvClosed := make(chan error, 1)
			cfg := endpoint.ListenConfig{
				Params: netio.ReceiveParams{BufferSize: 64, BufferCount: 4},
				Replies: &endpoint.ListenReplies{
					Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: n},
					OnSendCompleted: func(ep *endpoint.ReceiveEndpoint, _ uint64, st netio.Status) {
						if st != netio.OK {
							failed.Add(1)
							return
						}
						if ok.Add(1) == n {
							assert.NoError(t, ep.Close()) // at once, with the replies maybe not delivered
						}
					},
				},
				OnData: func(ep *endpoint.ReceiveEndpoint, _ []byte) {
					for seq := range uint64(n) {
						buf := ep.GetBuffer()
						if buf == nil {
							failed.Add(1)
							continue
						}
						pat.Fill(buf.Bytes(), 0, seq)
						if ep.SendBuffer(buf, len(buf.Bytes())) != netio.OK {
							ep.ReleaseBuffer(buf.ID())
							failed.Add(1)
						}
					}
				},
				OnConnectionClosed: func(*endpoint.ReceiveEndpoint, error) { srvClosed <- nil },
			}
			l := listen(t, mgr, cfg)
			sent := newSender(4)
			scfg := sent.config(netio.BufferedSendParams{BufferSize: 64, BufferCount: 1})
			scfg.Replies = col.replies()
			// Fewer reply buffers than replies, and a slow OnReply: the
			// provider holds replies until buffers are posted again.
			scfg.Replies.Params.BufferCount = 2
			col.onData = func(*endpoint.SendEndpointBuffered, []byte) { time.Sleep(time.Millisecond) }
			scfg.OnConnectionClosed = func(err error) {
				repliedAtClose.Store(col.n.Load())
				sent.closed <- err
			}
			s := dial(t, mgr, l.Addr(), scfg)
			buf := s.GetBuffer()
			require.NotNil(t, buf)
			require.Equal(t, netio.OK, s.SendBuffer(buf, 4))
			assert.ErrorIs(t, recvErr(t, sent.closed, 20*time.Second, "dialer's OnConnectionClosed"), netio.ErrConnectionClosed)
			assert.NoError(t, recvErr(t, srvClosed, 10*time.Second, "listener's OnConnectionClosed"))
			assert.Zero(t, failed.Load(), "replies not sent or not completed OK")
			assert.Equal(t, int64(n), ok.Load(), "replies completed OK")
			assert.Equal(t, ok.Load(), repliedAtClose.Load(), "replies completed OK but not delivered before the close")
			assert.Zero(t, col.bad.Load(), "replies out of order or corrupt")
			assert.Equal(t, uint64(n), s.Stats().Received)
		})
	}
}
