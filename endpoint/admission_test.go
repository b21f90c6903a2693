package endpoint_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

func TestListenerAdmitsByPeerAddress(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			cfg := rcv.config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
			var mu sync.Mutex
			var peers []string
			refuse := false
			cfg.Admit = func(peer string) error {
				mu.Lock()
				defer mu.Unlock()
				peers = append(peers, peer)
				if refuse {
					return errors.New("not on the readout network")
				}
				return nil
			}
			l := listen(t, mgr, cfg)

			good := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}))
			mu.Lock()
			refuse = true
			mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}})
			assert.ErrorIs(t, err, netio.ErrConnectionRefused, "a refused peer gets a libfabric reject")
			assert.Equal(t, uint64(1), l.Rejected())
			assert.Equal(t, uint64(1), l.Accepted())

			mu.Lock()
			require.Len(t, peers, 2)
			for _, p := range peers {
				host, port, err := net.SplitHostPort(p)
				assert.NoError(t, err, p)
				assert.Equal(t, "127.0.0.1", host)
				assert.NotEqual(t, "0", port)
			}
			mu.Unlock()

			// The admitted connection keeps working.
			buf := good.GetBuffer()
			require.NotNil(t, buf)
			copy(buf.Bytes(), "still here")
			require.Equal(t, netio.OK, good.SendBuffer(buf, 10))
			waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 1 }, "message on the admitted connection")
		})
	}
}

func TestListenerMaxConnections(t *testing.T) {
	mgr := openDomain(t, "tcp")
	cfg := newReceiver().config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
	cfg.MaxConnections = 2
	l := listen(t, mgr, cfg)
	params := netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}
	first := dial(t, mgr, l.Addr(), newSender(4).config(params))
	dial(t, mgr, l.Addr(), newSender(4).config(params))
	before := mgr.Stats().Registrations

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{Params: params})
	assert.ErrorIs(t, err, netio.ErrConnectionRefused, "the third is refused")
	assert.Equal(t, uint64(1), l.Rejected())
	assert.Equal(t, before, mgr.Stats().Registrations, "nothing registered for a refused request")

	require.NoError(t, first.Close())
	waitFor(t, 5*time.Second, func() bool { return len(l.Connections()) == 1 }, "the listener forgets the closed connection")
	dial(t, mgr, l.Addr(), newSender(4).config(params)) // room again
	assert.Equal(t, uint64(3), l.Accepted())
}

func TestListenRejectsNegativeMaxConnections(t *testing.T) {
	mgr := openDomain(t, "tcp")
	cfg := newReceiver().config(netio.ReceiveParams{})
	cfg.MaxConnections = -1
	_, err := endpoint.Listen(mgr, "127.0.0.1:0", cfg)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}
