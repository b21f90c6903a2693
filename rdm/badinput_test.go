package rdm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

func nop(*rdm.Endpoint, rdm.Peer, []byte) {}

// TestBadInputOpen: what Open cannot work with is refused with its
// sentinel, and nothing stays registered.
func TestBadInputOpen(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	msg, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, msg.Close()) }()
	for name, tc := range map[string]struct {
		mgr  *domain.Manager
		addr string
		cfg  rdm.Config
		want error
	}{
		"nil domain":            {nil, "127.0.0.1:0", rdm.Config{OnData: nop}, netio.ErrInvalidArgument},
		"a connected domain":    {msg, "127.0.0.1:0", rdm.Config{OnData: nop}, netio.ErrInvalidArgument},
		"no OnData":             {mgr, "127.0.0.1:0", rdm.Config{}, netio.ErrInvalidArgument},
		"address without port":  {mgr, "127.0.0.1", rdm.Config{OnData: nop}, netio.ErrBadAddress},
		"address not IP":        {mgr, "localhost:0", rdm.Config{OnData: nop}, netio.ErrBadAddress},
		"negative MaxPeers":     {mgr, "127.0.0.1:0", rdm.Config{OnData: nop, MaxPeers: -1}, netio.ErrInvalidArgument},
		"negative buffer count": {mgr, "127.0.0.1:0", rdm.Config{OnData: nop, Send: netio.BufferedSendParams{BufferCount: -1}}, netio.ErrInvalidArgument},
		"negative PeerTimeout":  {mgr, "127.0.0.1:0", rdm.Config{OnData: nop, PeerTimeout: -1}, netio.ErrInvalidArgument},
		"negative InjectQueue":  {mgr, "127.0.0.1:0", rdm.Config{OnData: nop, InjectQueue: -1}, netio.ErrInvalidArgument},
		"huge InjectQueue":      {mgr, "127.0.0.1:0", rdm.Config{OnData: nop, InjectQueue: netio.MaxBufferCount + 1}, netio.ErrInvalidArgument},
	} {
		e, err := rdm.Open(tc.mgr, tc.addr, tc.cfg)
		assert.ErrorIs(t, err, tc.want, name)
		assert.Nil(t, e, name)
	}
	assert.Zero(t, mgr.Stats().Registrations)
}

// TestBadInputSends: bad peers, sizes and buffers are refused, changing
// nothing; after Close everything is Closed.
func TestBadInputSends(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	e, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop, Send: netio.BufferedSendParams{BufferSize: 64, BufferCount: 2}})
	require.NoError(t, err)
	other := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop})
	for _, bad := range []string{"", "127.0.0.1", "127.0.0.1:0", "nohost:1", "127.0.0.1:99999"} {
		_, err := e.AddPeer(bad)
		assert.ErrorIs(t, err, netio.ErrBadAddress, "AddPeer(%q)", bad)
	}
	peer, err := e.AddPeer(rx.Addr())
	require.NoError(t, err)
	again, err := e.AddPeer(rx.Addr())
	require.NoError(t, err)
	assert.Equal(t, peer, again, "the same peer twice is one peer")
	assert.Equal(t, 1, e.Peers())

	buf := e.GetBuffer()
	require.NotNil(t, buf)
	theirs := other.GetBuffer()
	require.NotNil(t, theirs)
	assert.Equal(t, netio.InvalidArgument, e.SendBuffer(buf, 65, peer), "larger than the buffer")
	assert.Equal(t, netio.InvalidArgument, e.SendBuffer(buf, -1, peer))
	assert.Equal(t, netio.InvalidArgument, e.SendBuffer(nil, 1, peer))
	assert.Equal(t, netio.InvalidArgument, e.SendBuffer(theirs, 1, peer), "another endpoint's buffer")
	assert.Equal(t, netio.InvalidArgument, e.SendBuffer(buf, 1, rdm.Peer{}), "the zero peer")
	assert.Equal(t, netio.InvalidArgument, e.Inject(make([]byte, e.InjectSize()+1), peer), "larger than inject_size")
	assert.Equal(t, netio.InvalidArgument, e.Inject([]byte("x"), rdm.Peer{}))
	_, st := e.ReleaseBuffer(1 << 40)
	assert.Equal(t, netio.InvalidArgument, st)
	assert.Equal(t, uint64(0), e.Stats().Sent, "nothing was sent")
	assert.Empty(t, e.PendingSends())
	_, st = other.ReleaseBuffer(theirs.ID())
	assert.Equal(t, netio.OK, st)

	require.Eventually(t, func() bool { return e.Inject([]byte("hello"), peer) == netio.OK }, 10*time.Second, time.Millisecond)
	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "idempotent")
	assert.Equal(t, netio.Closed, e.SendBuffer(buf, 1, peer))
	assert.Equal(t, netio.Closed, e.Inject([]byte("x"), peer))
	assert.Nil(t, e.GetBuffer())
	_, err = e.AddPeer(rx.Addr())
	assert.ErrorIs(t, err, netio.ErrClosed)
	assert.ErrorIs(t, e.RemovePeer(peer), netio.ErrClosed)
	assert.Zero(t, e.Peers(), "the address vector is empty after Close")
}

// TestCloseCancelsPending: sends still pending at Close are reported
// Canceled, each once, and the buffers come back.
func TestCloseCancelsPending(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	statuses := make(chan netio.Status, 64)
	e, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: nop,
		Send:            netio.BufferedSendParams{BufferSize: 1 << 20, BufferCount: 8},
		OnSendCompleted: func(_ uint64, st netio.Status) { statuses <- st }})
	require.NoError(t, err)
	// A peer nobody listens at: ofi_rxm keeps the sends while it tries to
	// connect.
	peer, err := e.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	sent := 0
	for buf := e.GetBuffer(); buf != nil; buf = e.GetBuffer() {
		if st := e.SendBuffer(buf, buf.Size(), peer); st == netio.OK {
			sent++
		} else {
			_, _ = e.ReleaseBuffer(buf.ID())
			break
		}
	}
	require.Positive(t, sent)
	require.NoError(t, e.Close())
	got := map[netio.Status]int{}
	for range sent {
		got[<-statuses]++
	}
	assert.Equal(t, sent, got[netio.Canceled]+got[netio.Failed], "every send reported once, none OK: %v", got)
	select {
	case st := <-statuses:
		t.Errorf("a send reported twice: %v", st)
	case <-time.After(100 * time.Millisecond):
	}
	st := e.Stats()
	assert.Equal(t, uint64(sent), st.Sent)
	assert.Equal(t, uint64(sent), st.Failed)
}
