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
// back with Repost, and keeps the results and, after each Repost, how
// many receives wait in the queue for the next read.
type reposter struct {
	p      *poll.Poller
	o      poll.Owner
	ep     *fabric.Endpoint // set on the poller goroutine before the first completion
	mem    *domain.Registration
	mu     sync.Mutex
	got    []poll.Result
	queued []int          // the queue's length after each Repost
	errno  []fabric.Errno // Repost's own refusals
	fill   bool           // fill the provider's receive queue before each repost
	rxSize int            // the provider's receive queue depth
	// errsAt is the poller's Stats.Errors as each failed result arrived.
	errsAt []uint64
}

func (r *reposter) HandleCompletion(key uint32, res poll.Result) {
	r.mu.Lock()
	r.got = append(r.got, res)
	if res.Status != netio.OK {
		r.errsAt = append(r.errsAt, r.p.Stats().Errors)
	}
	r.mu.Unlock()
	if res.Status != netio.OK {
		return
	}
	if r.fill { // the provider's receive queue full, the queued repost is refused
		for r.ep.Recv(r.mem.Addr()+64, 64, r.mem.Desc(), r.o.Context(1)) == 0 {
		}
	}
	errno := r.p.Repost(r.ep, r.mem.Addr()+uintptr(key)*64, 64, r.mem.Desc(), r.o.Context(key))
	queued := r.p.CQ().QueuedRecvs()
	r.mu.Lock()
	r.queued = append(r.queued, queued)
	if errno != 0 {
		r.errno = append(r.errno, errno)
	}
	r.mu.Unlock()
}

func (r *reposter) HandleEvent(ev fabric.Event) { ev.Info.Free() }

func (r *reposter) results() []poll.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]poll.Result(nil), r.got...)
}

// queuedAfter returns the queue's lengths after each Repost so far.
func (r *reposter) queuedAfter() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.queued...)
}

// repostPair is a reposter's endpoint and a client endpoint connected to
// it, on a poller of its own so that the reposter's queue holds nothing
// but its receives.
type repostPair struct {
	r    *reposter
	cep  *fabric.Endpoint
	co   poll.Owner
	cli  *recorder // the client's completions, under co
	smem *domain.Registration
}

// send sends n 8-byte messages from the client and waits until they have
// completed: the kernel has them, ready for the server's next read.
func (rp repostPair) send(t *testing.T, n int) {
	t.Helper()
	before := rp.cli.count(1)
	for i := range n {
		require.Zero(t, rp.cep.Send(rp.smem.Addr()+uintptr(i), 8, rp.smem.Desc(), rp.co.Context(1)))
	}
	eventually(t, func() bool { return rp.cli.count(1) == before+n }, "the sends completed")
}

// connectReposter connects a client endpoint, on a poller of its own, to
// a server endpoint on p's queues over tcp; the server's completions go to
// a reposter with one 64-byte receive posted (buffer 0). The endpoints
// close at the end of the test, the server's on p.
func connectReposter(t *testing.T, m *domain.Manager, p *poll.Poller) repostPair {
	t.Helper()
	r := &reposter{p: p}
	var err error
	r.o, err = p.Register(r)
	require.NoError(t, err)
	r.mem, err = m.AllocRegistered(4096, domain.AccessRecv)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.mem.Close()) })
	smem, err := m.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, smem.Close()) })
	pc := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, pc.Close()) }) // after the client's endpoint
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
	co, err := pc.Register(cli)
	require.NoError(t, err)
	cep, err := m.Domain().OpenEndpoint(dinfo, co.EndpointContext())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cep.Close()) })
	require.NoError(t, cep.BindEQ(pc.EQ()))
	require.NoError(t, cep.BindCQ(pc.CQ(), fabric.BindTransmit|fabric.BindRecv))
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
	r.rxSize = req.Info.RxSize()
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
	return repostPair{r: r, cep: cep, co: co, cli: cli, smem: smem}
}

// TestRepostRidesOnTheNextRead: with one receive buffer, which the
// handler gives back with Repost, every message of a stream arrives, so
// each reposted buffer was posted; and each repost waited in the queue
// for the poller's next read (each batch is that one receive), none was
// posted at once.
func TestRepostRidesOnTheNextRead(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	rp := connectReposter(t, m, p)
	r := rp.r
	const msgs = 20
	rp.send(t, msgs)
	eventually(t, func() bool { return len(r.results()) == msgs }, "every message through the one reposted buffer")
	for _, res := range r.results() {
		assert.Equal(t, netio.OK, res.Status)
		assert.Equal(t, 8, res.Len)
	}
	queued := r.queuedAfter()
	require.Len(t, queued, msgs)
	for i, n := range queued {
		assert.Equal(t, 1, n, "repost %d queued for the next read", i)
	}
	r.mu.Lock()
	assert.Empty(t, r.errno)
	r.mu.Unlock()
}

// TestRepostRefusedReachesTheOwner: a queued receive the provider refuses
// (the handler fills tcp's receive queue, 256 deep, before it reposts)
// comes back to its owner as a failed receive marked Unposted, with the
// provider's error, not counted as an error completion; Repost itself
// said nothing, as the post was queued.
func TestRepostRefusedReachesTheOwner(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	rp := connectReposter(t, m, p)
	r := rp.r
	p.Do(func() { r.fill = true })
	rp.send(t, 1)
	eventually(t, func() bool { return len(r.results()) == 2 }, "the message, then the refused repost")
	res := r.results()
	assert.Equal(t, netio.OK, res[0].Status)
	assert.False(t, res[0].Unposted)
	assert.True(t, res[1].Unposted)
	assert.Equal(t, netio.Failed, res[1].Status)
	assert.Equal(t, fabric.EAGAIN, res[1].Errno)
	assert.NotZero(t, res[1].Flags&fabric.FlagRecv)
	assert.Zero(t, p.Stats().Errors, "no error completion: the owner counts the refusal")
	r.mu.Lock()
	assert.Empty(t, r.errno, "Repost queued the receive")
	r.mu.Unlock()
}

// TestErrorCompletionCountedBeforeItsOwnerRuns: an error completion (a
// 100-byte message into the reposter's 64-byte buffer: tcp reports
// FI_ETRUNC) reaches its owner as Failed with the provider's error, and is
// in Stats.Errors already while the owner handles it; nothing is dropped.
func TestErrorCompletionCountedBeforeItsOwnerRuns(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	rp := connectReposter(t, m, p)
	r := rp.r
	require.Zero(t, rp.cep.Send(rp.smem.Addr(), 100, rp.smem.Desc(), rp.co.Context(1)))
	eventually(t, func() bool { return len(r.results()) == 1 }, "the truncated receive")
	res := r.results()[0]
	assert.Equal(t, netio.Failed, res.Status)
	assert.Equal(t, fabric.ETRUNC, res.Errno)
	assert.False(t, res.Unposted)
	r.mu.Lock()
	assert.Equal(t, []uint64{1}, r.errsAt, "counted in Stats.Errors before the owner ran")
	r.mu.Unlock()
	assert.Equal(t, uint64(1), p.Stats().Errors)
	assert.Zero(t, p.Stats().Dropped)
}

// TestRepostQueuesOnlyTheLastOfABatch: with 16 receive buffers and the
// poller held while 16 messages arrive, the poller delivers them in
// batches; a repost for the last completion of a batch waits in the queue
// for the next read, any other is posted at once, so that at most one
// receive ever waits (a burst never leaves the provider short of buffers
// while its batch is delivered). Rounds go on until one had a batch of more
// than one; then all 16 buffers must be posted, none dropped instead.
func TestRepostQueuesOnlyTheLastOfABatch(t *testing.T) {
	m := openManager(t)
	p := openPoller(t, m, poll.Config{})
	t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoints
	rp := connectReposter(t, m, p)
	r := rp.r
	const bufs = 16
	var err fabric.Errno
	p.Do(func() {
		for key := uint32(1); key < bufs && err == 0; key++ { // buffer 0 is posted
			err = r.ep.Recv(r.mem.Addr()+uintptr(key)*64, 64, r.mem.Desc(), r.o.Context(key))
		}
	})
	require.Zero(t, err)
	postedAtOnce := false
	for round := 1; round <= 20 && !postedAtOnce; round++ {
		hold, held := make(chan struct{}), make(chan struct{})
		require.True(t, p.Go(func() { close(held); <-hold }))
		<-held
		rp.send(t, bufs)
		close(hold)
		eventually(t, func() bool { return len(r.results()) == round*bufs }, "the round's messages, into the reposted buffers")
		for _, n := range r.queuedAfter() {
			postedAtOnce = postedAtOnce || n == 0
		}
	}
	assert.True(t, postedAtOnce, "no repost inside a batch was posted at once")
	for i, n := range r.queuedAfter() {
		assert.LessOrEqual(t, n, 1, "repost %d: only the last of a batch waits", i)
	}
	for _, res := range r.results() {
		assert.Equal(t, netio.OK, res.Status)
	}
	r.mu.Lock()
	assert.Empty(t, r.errno)
	r.mu.Unlock()
	// Every buffer is posted again, none dropped: the provider takes just
	// its depth less 16 more receives (a Do runs after a read, which has
	// posted what waited).
	more := 0
	p.Do(func() {
		for r.ep.Recv(r.mem.Addr()+bufs*64, 64, r.mem.Desc(), r.o.Context(bufs)) == 0 {
			more++
		}
	})
	assert.Equal(t, r.rxSize-bufs, more, "receives the provider took on top of the 16 buffers")
}
