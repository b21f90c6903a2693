package endpoint_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// constructor opens one kind of endpoint (or region) with mgr and addr and
// closes it again if that worked, returning the error.
type constructor func(mgr *domain.Manager, addr string) error

// closeIfOpen returns err, closing c when the call that made it worked.
func closeIfOpen(c interface{ Close() error }, err error) error {
	if err == nil {
		_ = c.Close()
	}
	return err
}

// dialers are the constructors that take a peer address; poller, when not
// nil, is the shared poller they are given.
func dialers(poller *cq.Poller) map[string]constructor {
	onData := func(*endpoint.ReceiveEndpoint, []byte) {}
	return map[string]constructor{
		"Listen": func(m *domain.Manager, a string) error {
			return closeIfOpen(endpoint.Listen(m, a, endpoint.ListenConfig{OnData: onData, Runtime: cq.Runtime{Poller: poller}}))
		},
		"Dial": func(m *domain.Manager, a string) error {
			return closeIfOpen(endpoint.Dial(context.Background(), m, a, endpoint.SendConfig{Runtime: cq.Runtime{Poller: poller}}))
		},
		"DialZeroCopy": func(m *domain.Manager, a string) error {
			return closeIfOpen(endpoint.DialZeroCopy(context.Background(), m, a, endpoint.ZeroCopyConfig{Runtime: cq.Runtime{Poller: poller}}))
		},
		"DialRMA": func(m *domain.Manager, a string) error {
			return closeIfOpen(endpoint.DialRMA(context.Background(), m, a, endpoint.RMAConfig{Runtime: cq.Runtime{Poller: poller}}))
		},
	}
}

// TestBadInputUnparsableAddresses: every constructor that takes an address
// refuses one that does not parse with netio.ErrBadAddress, before it
// registers memory or starts a goroutine (TestMain checks the goroutines).
func TestBadInputUnparsableAddresses(t *testing.T) {
	mgr := openDomain(t, "tcp")
	ctors := dialers(nil)
	ctors["DialReconnecting"] = func(m *domain.Manager, a string) error {
		return closeIfOpen(endpoint.DialReconnecting(m, a, endpoint.ReconnectConfig{}))
	}
	for _, addr := range []string{"", "nohostport", "1.2.3.4:99999", "[::1", "host:-1", ":7000", "127.0.0.1:", "[::1]:x"} {
		for name, open := range ctors {
			assert.ErrorIs(t, open(mgr, addr), netio.ErrBadAddress, "%s(%q)", name, addr)
			assert.Zero(t, mgr.Stats().Registrations, "%s(%q) registered memory", name, addr)
		}
	}
}

// TestBadInputNilOrClosedDomain: a nil domain is an invalid argument and a
// closed one is closed, for every constructor.
func TestBadInputNilOrClosedDomain(t *testing.T) {
	closed, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	ctors := dialers(nil)
	ctors["Expose"] = func(m *domain.Manager, _ string) error {
		return closeIfOpen(endpoint.Expose(m, make([]byte, 64), domain.AccessRemoteRead))
	}
	ctors["AllocExposed"] = func(m *domain.Manager, _ string) error {
		return closeIfOpen(endpoint.AllocExposed(m, 64, domain.AccessRemoteWrite))
	}
	ctors["DialReconnecting"] = func(m *domain.Manager, a string) error {
		return closeIfOpen(endpoint.DialReconnecting(m, a, endpoint.ReconnectConfig{}))
	}
	for name, open := range ctors {
		var err error
		require.NotPanics(t, func() { err = open(nil, "127.0.0.1:1") }, name)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, "%s: nil domain", name)
		require.NotPanics(t, func() { err = open(closed, "127.0.0.1:1") }, name)
		assert.ErrorIs(t, err, netio.ErrClosed, "%s: closed domain", name)
	}
	rs, err := endpoint.DialReconnecting(nil, "127.0.0.1:1", endpoint.ReconnectConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	assert.Nil(t, rs)
}

// TestBadInputClosedPoller: a shared poller that was closed is refused with
// netio.ErrClosed, and the refusal leaves it with no owner and the domain
// with no registration.
func TestBadInputClosedPoller(t *testing.T) {
	mgr := openDomain(t, "tcp")
	p, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	for name, open := range dialers(p) {
		assert.ErrorIs(t, open(mgr, "127.0.0.1:1"), netio.ErrClosed, name)
		assert.Zero(t, poll.Of(p).Owners(), name)
		assert.Zero(t, mgr.Stats().Registrations, name)
	}
}

// TestBadInputConfigs: settings an endpoint cannot work with are refused
// with netio.ErrInvalidArgument before anything is registered.
func TestBadInputConfigs(t *testing.T) {
	mgr, other := openDomain(t, "tcp"), openDomain(t, "tcp")
	shared, err := other.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer func() { assert.NoError(t, shared.Close()) }()
	foreignBufs, err := pool.New(other, pool.Config{Size: 4096})
	require.NoError(t, err)
	defer func() { assert.NoError(t, foreignBufs.Close()) }()
	recvBufs, err := pool.New(mgr, pool.Config{Size: 4096, Access: domain.AccessRecv})
	require.NoError(t, err)
	defer func() { assert.NoError(t, recvBufs.Close()) }()
	sendBufs, err := pool.New(mgr, pool.Config{Size: 4096})
	require.NoError(t, err)
	defer func() { assert.NoError(t, sendBufs.Close()) }()
	// More access than the buffers need (least access): a peer could write
	// into them, or a receive land in a send buffer.
	wider := map[string]*pool.Pool{}
	for name, access := range map[string]domain.Access{
		"send+remote-write": domain.AccessSend | domain.AccessRemoteWrite,
		"recv+remote-write": domain.AccessRecv | domain.AccessRemoteWrite,
		"send+recv":         domain.AccessSend | domain.AccessRecv,
	} {
		p, err := pool.New(mgr, pool.Config{Size: 4096, Access: access})
		require.NoError(t, err)
		defer func() { assert.NoError(t, p.Close()) }()
		wider[name] = p
	}

	const addr = "127.0.0.1:1" // never reached
	onData := func(*endpoint.ReceiveEndpoint, []byte) {}
	listen := func(cfg endpoint.ListenConfig) error {
		return closeIfOpen(endpoint.Listen(mgr, "127.0.0.1:0", cfg))
	}
	dialCfg := func(cfg endpoint.SendConfig) error {
		return closeIfOpen(endpoint.Dial(context.Background(), mgr, addr, cfg))
	}
	zeroCopy := func(cfg endpoint.ZeroCopyConfig) error {
		return closeIfOpen(endpoint.DialZeroCopy(context.Background(), mgr, addr, cfg))
	}
	for name, open := range map[string]func() error{
		"Listen nil OnData": func() error { return listen(endpoint.ListenConfig{}) },
		"Listen negative size": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, Params: netio.ReceiveParams{BufferSize: -1}})
		},
		"Listen negative count": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, Params: netio.ReceiveParams{BufferCount: -1}})
		},
		"Listen negative RMA chunk": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, RMA: endpoint.RMAParams{ChunkSize: -1}})
		},
		"Listen foreign buffers":   func() error { return listen(endpoint.ListenConfig{OnData: onData, Buffers: foreignBufs}) },
		"Listen send-only buffers": func() error { return listen(endpoint.ListenConfig{OnData: onData, Buffers: sendBufs}) },
		"Listen receive and remote-write buffers": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, Buffers: wider["recv+remote-write"]})
		},
		"Listen send and receive buffers": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, Buffers: wider["send+recv"]})
		},
		"Listen bad poller config": func() error {
			return listen(endpoint.ListenConfig{OnData: onData, Runtime: cq.Runtime{PollerConfig: cq.Config{Size: -1}}})
		},
		"Dial size above max": func() error {
			return dialCfg(endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: netio.MaxBufferSize + 1}})
		},
		"Dial shared of other domain": func() error {
			sm, err := sendbuf.NewSendBufferManager(other, netio.BufferedSendParams{BufferSize: 64, BufferCount: 2})
			if err != nil {
				return err
			}
			defer sm.Close()
			return dialCfg(endpoint.SendConfig{Buffers: sendbuf.Shared(sm)})
		},
		"Dial foreign buffers":      func() error { return dialCfg(endpoint.SendConfig{Buffers: sendbuf.Pooled(foreignBufs)}) },
		"Dial receive-only buffers": func() error { return dialCfg(endpoint.SendConfig{Buffers: sendbuf.Pooled(recvBufs)}) },
		"Dial send and remote-write buffers": func() error {
			return dialCfg(endpoint.SendConfig{Buffers: sendbuf.Pooled(wider["send+remote-write"])})
		},
		"Dial send and receive buffers": func() error { return dialCfg(endpoint.SendConfig{Buffers: sendbuf.Pooled(wider["send+recv"])}) },
		"Dial bad poller config": func() error {
			return dialCfg(endpoint.SendConfig{Runtime: cq.Runtime{PollerConfig: cq.Config{Mode: cq.BusyPoll + 1}}})
		},
		"DialZeroCopy negative size":  func() error { return zeroCopy(endpoint.ZeroCopyConfig{HeaderSize: -1}) },
		"DialZeroCopy negative count": func() error { return zeroCopy(endpoint.ZeroCopyConfig{HeaderCount: -1}) },
		"DialZeroCopy too many slots": func() error { return zeroCopy(endpoint.ZeroCopyConfig{HeaderCount: netio.MaxBufferCount + 1}) },
		"DialZeroCopy empty region":   func() error { return zeroCopy(endpoint.ZeroCopyConfig{Region: []byte{}}) },
		"DialZeroCopy two regions": func() error {
			return zeroCopy(endpoint.ZeroCopyConfig{Region: make([]byte, 64), SharedRegion: shared})
		},
		"DialRMA negative window": func() error {
			return closeIfOpen(endpoint.DialRMA(context.Background(), mgr, addr, endpoint.RMAConfig{Params: endpoint.RMAParams{MaxInFlight: -1}}))
		},
		"DialReconnecting negative timeout": func() error {
			return closeIfOpen(endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{DialTimeout: -1}))
		},
		"DialReconnecting huge backlog": func() error {
			return closeIfOpen(endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{Backlog: 1 << 40}))
		},
		"DialReconnecting backlog above MaxBufferCount": func() error {
			return closeIfOpen(endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{Backlog: netio.MaxBufferCount + 1,
				Send: endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 1}}}))
		},
		"DialReconnecting backlog above MaxReconnectBacklogBytes": func() error {
			return closeIfOpen(endpoint.DialReconnecting(mgr, addr, endpoint.ReconnectConfig{Backlog: 2,
				Send: endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: endpoint.MaxReconnectBacklogBytes/2 + 1}}}))
		},
		"AllocExposed local access": func() error {
			return closeIfOpen(endpoint.AllocExposed(mgr, 64, domain.AccessRemoteRead|domain.AccessSend))
		},
		"AllocExposed negative size": func() error {
			return closeIfOpen(endpoint.AllocExposed(mgr, -1, domain.AccessRemoteRead))
		},
	} {
		assert.ErrorIs(t, open(), netio.ErrInvalidArgument, name)
		assert.Zero(t, mgr.Stats().Registrations, "%s registered memory", name)
	}
}

// TestBadInputAfterClose calls the methods of every endpoint kind after
// Close: each refuses with Closed (or ErrClosed), hands out nothing, and a
// second Close is a no-op.
func TestBadInputAfterClose(t *testing.T) {
	s := newRMASetup(t, "tcp", endpoint.RMAConfig{})
	connected := make(chan *endpoint.ReceiveEndpoint, 1)
	cfg := newReceiver().config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
	cfg.OnConnectionEstablished = func(ep *endpoint.ReceiveEndpoint) {
		select { // the first is the buffered endpoint's; callbacks must not block
		case connected <- ep:
		default:
		}
	}
	l := listen(t, s.target, cfg)
	buffered := dial(t, s.init, l.Addr(), endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 64, BufferCount: 2}})
	recv := <-connected
	zc := dialZeroCopy(t, s.init, l.Addr(), endpoint.ZeroCopyConfig{})
	region, err := endpoint.AllocExposed(s.target, 4096, domain.AccessRemoteRead)
	require.NoError(t, err)
	local := s.local(t, 4096, domain.AccessRead)
	localAtTarget, err := s.target.AllocRegistered(4096, domain.AccessRead)
	require.NoError(t, err)
	defer func() { assert.NoError(t, localAtTarget.Close()) }()
	held := buffered.GetBuffer()
	require.NotNil(t, held)

	for _, c := range []interface{ Close() error }{buffered, zc, s.ep, recv, region} {
		require.NoError(t, c.Close())
		require.NoError(t, c.Close(), "a second Close is a no-op")
	}
	desc := region.Descriptor()

	assert.Nil(t, buffered.GetBuffer())
	assert.Equal(t, netio.Closed, buffered.SendBuffer(held, 8))
	_, st := buffered.ReleaseBuffer(1 << 40)
	assert.Equal(t, netio.InvalidArgument, st)
	assert.Empty(t, buffered.PendingSends())
	assert.Equal(t, netio.Closed, zc.Send([]byte("h"), []byte("data"), 1))
	assert.Equal(t, netio.Closed, zc.SendV(nil, nil, 2))
	assert.Equal(t, netio.InvalidArgument, zc.SendV(nil, make([][]byte, zc.MaxPieces()+1), 3), "too many pieces, closed or not")
	assert.Empty(t, zc.PendingSends())
	assert.Zero(t, zc.Stats().Sent)
	_, err = s.ep.PullAsync(local, 0, desc, 0, 64)
	assert.ErrorIs(t, err, netio.ErrClosed, "RMA endpoint")
	_, err = recv.Pull(testCtx(t), localAtTarget, 0, desc, 0, 64)
	assert.ErrorIs(t, err, netio.ErrClosed, "receive endpoint")
	assert.NotContains(t, l.Connections(), recv, "a closed connection is forgotten at once")

	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	assert.NotEmpty(t, l.Addr(), "the address stays readable")
}
