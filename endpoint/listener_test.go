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
