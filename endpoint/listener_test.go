package endpoint_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/fabric"
)

func TestIdleTimeoutClosesASilentConnection(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			cfg := rcv.config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
			cfg.IdleTimeout = 100 * time.Millisecond
			l := listen(t, mgr, cfg)

			snd := newSender(4)
			busy := dial(t, mgr, l.Addr(), snd.config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}))
			dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}))
			waitFor(t, 5*time.Second, func() bool { return rcv.est.Load() == 2 }, "both connections established")

			// The busy connection keeps sending through several timeouts;
			// the silent one is closed.
			deadline := time.Now().Add(400 * time.Millisecond)
			for time.Now().Before(deadline) {
				if buf := busy.GetBuffer(); buf != nil {
					require.Equal(t, netio.OK, busy.SendBuffer(buf, 8))
				}
				time.Sleep(10 * time.Millisecond)
			}
			err := recvErr(t, rcv.closed, 5*time.Second, "the silent connection closed")
			assert.ErrorIs(t, err, netio.ErrTimeout)
			assert.ErrorIs(t, err, netio.ErrConnectionClosed)
			select {
			case err := <-rcv.closed:
				t.Fatalf("the busy connection closed too: %v", err)
			default:
			}
			s := l.Stats()
			assert.Equal(t, 1, s.Active, "only the busy connection is left")
			assert.Equal(t, uint64(2), s.Accepted)
			assert.Equal(t, uint64(rcv.count.Load()), s.Received.Messages)
		})
	}
}

// tcp drops a connection whose peer sends a message larger than the posted
// buffers; the receiver says so, and the listener keeps the error counted
// after the connection is gone.
func TestOversizeMessageIsNamed(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	cfg := rcv.config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
	recvErrs := make(chan error, 4)
	cfg.OnReceiveError = func(_ *endpoint.ReceiveEndpoint, err error) {
		select {
		case recvErrs <- err:
		default:
		}
	}
	l := listen(t, mgr, cfg)
	s := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 4096, BufferCount: 2}))
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 4096))

	err := recvErr(t, recvErrs, 5*time.Second, "the receive error")
	assert.ErrorIs(t, err, fabric.ETRUNC)
	assert.Contains(t, err.Error(), "larger than the 256-byte receive buffers")
	closed := recvErr(t, rcv.closed, 5*time.Second, "the connection closed")
	assert.ErrorIs(t, closed, netio.ErrConnectionClosed)
	assert.ErrorIs(t, closed, fabric.ETRUNC, "the close names the oversize message")
	waitFor(t, 5*time.Second, func() bool { return l.Stats().Active == 0 }, "the connection retired")
	assert.Equal(t, uint64(1), l.Stats().Received.Errors, "the error outlives its connection")
}

func TestListenRejectsNegativeIdleTimeout(t *testing.T) {
	mgr := openDomain(t, "tcp")
	cfg := newReceiver().config(netio.ReceiveParams{})
	cfg.IdleTimeout = -time.Second
	_, err := endpoint.Listen(mgr, "127.0.0.1:0", cfg)
	assert.True(t, errors.Is(err, netio.ErrInvalidArgument), "%v", err)
}
