package poll_test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// reposter is a server-side Handler that reposts every buffer it gets
// back with Repost, and keeps the results.
type reposter struct {
	p     *poll.Poller
	o     poll.Owner
	ep    *fabric.Endpoint // set on the poller goroutine before the first completion
	mem   *domain.Registration
	mu    sync.Mutex
	got   []poll.Result
	errno []fabric.Errno // Repost's own refusals
	fill  bool           // fill the provider's receive queue before each repost
}

func (r *reposter) HandleCompletion(key uint32, res poll.Result) {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
	if res.Status != netio.OK {
		return
	}
	if r.fill { // the provider's receive queue full, the queued repost is refused
		for r.ep.Recv(r.mem.Addr()+64, 64, r.mem.Desc(), r.o.Context(1)) == 0 {
		}
	}
	if errno := r.p.Repost(r.ep, r.mem.Addr()+uintptr(key)*64, 64, r.mem.Desc(), r.o.Context(key)); errno != 0 {
		r.mu.Lock()
		r.errno = append(r.errno, errno)
		r.mu.Unlock()
	}
}

func (r *reposter) HandleEvent(ev fabric.Event) { ev.Info.Free() }

func (r *reposter) results() []poll.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]poll.Result(nil), r.got...)
}

// connectReposter connects a client endpoint to a server endpoint on p's
// queues over tcp; the server's completions go to a reposter with one
// 64-byte receive posted. It returns the reposter and the client endpoint
// (closed at the end of the test, the server's on the poller).
func connectReposter(t *testing.T, m *domain.Manager, p *poll.Poller) (*reposter, *fabric.Endpoint) {
	t.Helper()
	r := &reposter{p: p}
	var err error
	r.o, err = p.Register(r)
	require.NoError(t, err)
	r.mem, err = m.AllocRegistered(4096, domain.AccessRecv)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.mem.Close()) })
	linfo, err := fabric.GetInfo(fabric.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	require.NoError(t, err)
	defer linfo.Free()
	eq, err := m.Fabric().OpenEQ(16, false)
	require.NoError(t, err)
	defer func() { assert.NoError(t, eq.Close()) }()
	pep, err := m.Fabric().OpenPassiveEndpoint(linfo, 0)
	require.NoError(t, err)
	defer func() { assert.NoError(t, pep.Close()) }()
	require.NoError(t, pep.Bind(eq))
	require.NoError(t, pep.Listen())
	addr, err := pep.Addr()
	require.NoError(t, err)
	host, port, _ := net.SplitHostPort(addr)
	dinfo, err := fabric.GetInfo(fabric.Hints{Provider: "tcp", Node: host, Service: port})
	require.NoError(t, err)
	defer dinfo.Free()
	cli := newRecorder()
	co, err := p.Register(cli)
	require.NoError(t, err)
	cep, err := m.Domain().OpenEndpoint(dinfo, co.EndpointContext())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cep.Close()) })
	require.NoError(t, cep.BindEQ(p.EQ()))
	require.NoError(t, cep.BindCQ(p.CQ(), fabric.BindTransmit|fabric.BindRecv))
	require.NoError(t, cep.Enable())
	require.NoError(t, cep.Connect(dinfo))
	var req fabric.Event
	for req.Kind != fabric.EventConnReq {
		ev, ok, err := eq.Read()
		require.NoError(t, err)
		if ok {
			req = ev
		}
	}
	defer req.Info.Free()
	p.Do(func() {
		if r.ep, err = m.Domain().OpenEndpoint(req.Info, r.o.EndpointContext()); err != nil {
			return
		}
		_ = r.ep.BindEQ(p.EQ())
		_ = r.ep.BindCQ(p.CQ(), fabric.BindTransmit|fabric.BindRecv)
		_ = r.ep.Enable()
		if errno := r.ep.Recv(r.mem.Addr(), 64, r.mem.Desc(), r.o.Context(0)); errno != 0 {
			err = errno
			return
		}
		err = r.ep.Accept()
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Do(func() { assert.NoError(t, r.ep.Close()) })
	})
	eventually(t, func() bool { cli.mu.Lock(); defer cli.mu.Unlock(); return len(cli.events) == 1 }, "client connected")
	require.Equal(t, fabric.EventConnected, cli.events[0].Kind)
	return r, cep
}

// TestRepostRidesOnTheNextRead: with one receive buffer, which the
// handler gives back with Repost, every message of a stream arrives, so
// each reposted buffer was posted by the poller's next read.
func TestRepostRidesOnTheNextRead(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	r, cep := connectReposter(t, m, p)
	smem, err := m.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer smem.Close()
	const msgs = 20
	for i := range msgs {
		require.Zero(t, cep.Send(smem.Addr()+uintptr(i), 8, smem.Desc(), 0))
	}
	eventually(t, func() bool { return len(r.results()) == msgs }, "every message through the one reposted buffer")
	for _, res := range r.results() {
		assert.Equal(t, netio.OK, res.Status)
		assert.Equal(t, 8, res.Len)
	}
	r.mu.Lock()
	assert.Empty(t, r.errno)
	r.mu.Unlock()
}

// TestRepostRefusedReachesTheOwner: a queued receive the provider refuses
// (the handler fills tcp's receive queue, 256 deep, before it reposts)
// comes back to its owner as a failed receive marked Unposted, with the
// provider's error; Repost itself said nothing, as the post was queued.
func TestRepostRefusedReachesTheOwner(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	r, cep := connectReposter(t, m, p)
	p.Do(func() { r.fill = true })
	smem, err := m.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer smem.Close()
	require.Zero(t, cep.Send(smem.Addr(), 8, smem.Desc(), 0))
	eventually(t, func() bool { return len(r.results()) == 2 }, "the message, then the refused repost")
	res := r.results()
	assert.Equal(t, netio.OK, res[0].Status)
	assert.False(t, res[0].Unposted)
	assert.True(t, res[1].Unposted)
	assert.Equal(t, netio.Failed, res[1].Status)
	assert.Equal(t, fabric.EAGAIN, res[1].Errno)
	assert.NotZero(t, res[1].Flags&fabric.FlagRecv)
	assert.Equal(t, uint64(1), p.Stats().Errors)
	r.mu.Lock()
	assert.Empty(t, r.errno, "Repost queued the receive")
	r.mu.Unlock()
}

// TestRepostQueuesOnlyTheLastOfABatch: a repost for the last completion of
// a batch waits in the queue for the next read, which posts it; any other
// is posted at once, so that a burst never leaves the provider short of
// buffers while its batch is delivered.
func TestRepostQueuesOnlyTheLastOfABatch(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	r, _ := connectReposter(t, m, p)
	var inBatch, last fabric.Errno
	var queuedInBatch, queuedLast int
	p.Do(func() {
		p.SetLastOfBatch(false)
		inBatch = p.Repost(r.ep, r.mem.Addr()+64, 64, r.mem.Desc(), r.o.Context(1))
		queuedInBatch = p.CQ().QueuedRecvs()
		p.SetLastOfBatch(true)
		last = p.Repost(r.ep, r.mem.Addr()+128, 64, r.mem.Desc(), r.o.Context(2))
		queuedLast = p.CQ().QueuedRecvs()
		p.SetLastOfBatch(false)
	})
	assert.Zero(t, inBatch)
	assert.Zero(t, last)
	assert.Zero(t, queuedInBatch, "posted at once")
	assert.Equal(t, 1, queuedLast, "queued for the next read")
	eventually(t, func() bool {
		var n int
		p.Do(func() { n = p.CQ().QueuedRecvs() })
		return n == 0
	}, "the next read posted it")
}
