package fabric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// queuePair is a connected pair of tcp endpoints, the server's with a
// registered receive buffer and no receive posted.
type queuePair struct {
	srv, cli *stack
	sep, cep *fabric.Endpoint
	rbuf     []byte
	desc     uintptr
}

func openQueuePair(t *testing.T) queuePair {
	t.Helper()
	qp := queuePair{srv: openStack(t, "tcp"), cli: openStack(t, "tcp"), rbuf: mmap(t, 4096)}
	rmr, err := qp.srv.dom.RegisterMemory(addr(qp.rbuf), len(qp.rbuf), fabric.AccessRecv, 1)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rmr.Close()) }) // after the endpoints, closed by cleanups registered later
	qp.desc = rmr.Desc()
	qp.cep = connectPair(t, qp.srv, qp.cli, func(ep *fabric.Endpoint) { qp.sep = ep })
	return qp
}

// TestQueueRecvPostedByTheNextRead: a receive queued with QueueRecv is not
// posted until the queue's next read, which posts it before it reads, so
// that a message sent meanwhile lands in it.
func TestQueueRecvPostedByTheNextRead(t *testing.T) {
	qp := openQueuePair(t)
	srv, cli, sep, rbuf, desc := qp.srv, qp.cli, qp.sep, qp.rbuf, qp.desc
	require.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), len(rbuf), desc, 0x99))
	assert.Equal(t, 1, srv.cq.QueuedRecvs())
	postSend(t, cli, qp.cep, "queued", 0x55)

	var got *fabric.Completion
	for deadline := time.Now().Add(10 * time.Second); got == nil && time.Now().Before(deadline); {
		_, _, errno := cli.cq.Read() // the client's progress
		require.Zero(t, errno)
		n, avail, errno := srv.cq.Read()
		require.Zero(t, errno)
		require.False(t, avail)
		assert.Zero(t, srv.cq.QueuedRecvs(), "the read posted the queued receive")
		if n > 0 {
			c := srv.cq.Entry(0)
			got = &c
		}
	}
	require.NotNil(t, got, "no receive completion")
	assert.Equal(t, uint64(0x99), got.Context)
	assert.Equal(t, uint64(6), got.Len)
	assert.Equal(t, "queued", string(rbuf[:6]))
	_, _, ok := srv.cq.RecvFailure()
	assert.False(t, ok)
}

// TestQueueRecvRefusedPostIsReported: posts the provider refuses (tcp's
// receive queue holds 256) come back from RecvFailure with their context
// and error, and the others are posted.
func TestQueueRecvRefusedPostIsReported(t *testing.T) {
	qp := openQueuePair(t)
	srv, sep, rbuf, desc := qp.srv, qp.sep, qp.rbuf, qp.desc
	failed := map[uint64]fabric.Errno{}
	const rounds = 6 // 6 x 64 receives, more than the queue takes
	for r := range rounds {
		for i := range fabric.RecvQueueSize {
			require.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, uint64(r*fabric.RecvQueueSize+i)))
		}
		_, _, errno := srv.cq.Read()
		require.Zero(t, errno)
		for ctx, errno, ok := srv.cq.RecvFailure(); ok; ctx, errno, ok = srv.cq.RecvFailure() {
			failed[ctx] = errno
		}
	}
	require.NotEmpty(t, failed, "tcp took %d receives", rounds*fabric.RecvQueueSize)
	assert.Less(t, len(failed), rounds*fabric.RecvQueueSize, "some were posted")
	for ctx, errno := range failed {
		assert.Equal(t, fabric.EAGAIN, errno, "receive %d", ctx)
		assert.GreaterOrEqual(t, ctx, uint64(fabric.RecvQueueSize), "the first 64 fit")
	}

	// Refusals not yet taken with RecvFailure hold their places: the queue
	// takes only as many receives as the next read can list refusals for.
	for i := range fabric.RecvQueueSize {
		require.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, uint64(1000+i)))
	}
	_, _, errno := srv.cq.Read() // the provider is full: every one refused
	require.Zero(t, errno)
	assert.Equal(t, fabric.EAGAIN, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, 2000), "64 refusals waiting")
	const taken = 10
	for range taken {
		_, _, ok := srv.cq.RecvFailure()
		require.True(t, ok)
	}
	for i := range taken {
		assert.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, uint64(2000+i)), "room for %d", taken)
	}
	assert.Equal(t, fabric.EAGAIN, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, 3000))
	assert.Equal(t, taken, srv.cq.QueuedRecvs())
	_, _, errno = srv.cq.Read()
	require.Zero(t, errno)
	refused := 0
	for _, _, ok := srv.cq.RecvFailure(); ok; _, _, ok = srv.cq.RecvFailure() {
		refused++
	}
	assert.Equal(t, fabric.RecvQueueSize, refused, "every refusal listed, none dropped")
}

// TestQueueRecvBadInput: refusals change nothing, a full queue says
// EAGAIN, and closing an endpoint drops its queued receives, which a read
// then never posts into the freed endpoint.
func TestQueueRecvBadInput(t *testing.T) {
	qp := openQueuePair(t)
	srv, sep, rbuf, desc := qp.srv, qp.sep, qp.rbuf, qp.desc
	other := openStack(t, "tcp")

	assert.Equal(t, fabric.EBADF, srv.cq.QueueRecv(nil, addr(rbuf), 64, desc, 1))
	assert.Equal(t, fabric.EINVAL, srv.cq.QueueRecv(sep, addr(rbuf), -1, desc, 1))
	assert.Equal(t, fabric.EINVAL, other.cq.QueueRecv(sep, addr(rbuf), 64, desc, 1),
		"an endpoint whose receives complete on another queue, which could close while the receive waits")
	assert.Zero(t, srv.cq.QueuedRecvs())
	assert.Zero(t, other.cq.QueuedRecvs())
	require.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, 1))
	assert.Equal(t, fabric.EINVAL, other.cq.QueueRecv(sep, addr(rbuf), 64, desc, 2),
		"an endpoint's receives wait on one queue")
	assert.Zero(t, other.cq.QueuedRecvs())
	for i := 1; i < fabric.RecvQueueSize; i++ {
		require.Zero(t, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, uint64(i+1)))
	}
	assert.Equal(t, fabric.EAGAIN, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, 99))
	assert.Equal(t, fabric.RecvQueueSize, srv.cq.QueuedRecvs())

	require.NoError(t, sep.Close())
	assert.Zero(t, srv.cq.QueuedRecvs(), "Close drops the endpoint's queued receives")
	_, _, errno := srv.cq.Read()
	assert.Zero(t, errno)
	_, _, ok := srv.cq.RecvFailure()
	assert.False(t, ok)
	assert.Equal(t, fabric.EBADF, srv.cq.QueueRecv(sep, addr(rbuf), 64, desc, 1), "a closed endpoint")

	q, err := srv.dom.OpenCQ(16, false)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	assert.Equal(t, fabric.EBADF, q.QueueRecv(sep, addr(rbuf), 64, desc, 1))
	assert.Zero(t, q.QueuedRecvs())
	_, _, ok = q.RecvFailure()
	assert.False(t, ok)
}

// TestQueueRecvCloseBesideQueueClose: an endpoint with a receive queued
// may close on one goroutine while its queue closes on another (poll's Do
// once the poller has stopped, beside the poller closing its queues): the
// queue's close waits for the endpoint's (EBUSY until then), and under
// -race the two share no unordered memory (the queue's close frees what
// the endpoint's close reads to drop its queued receive). The endpoint is
// never connected: a tcp listener closed after its queue is not safe.
func TestQueueRecvCloseBesideQueueClose(t *testing.T) {
	s := openStack(t, "tcp")
	q, err := s.dom.OpenCQ(16, false)
	require.NoError(t, err)
	ep := openEP(t, s)
	require.NoError(t, ep.BindCQ(q, fabric.BindTransmit|fabric.BindRecv))
	rbuf := mmap(t, 4096)
	require.Zero(t, q.QueueRecv(ep, addr(rbuf), 64, 0, 1))
	epClosed, cqClosed := make(chan error, 1), make(chan error, 1)
	go func() { epClosed <- ep.Close() }()
	go func() { // no channel or lock orders it after the endpoint's close: only the queue's EBUSY while bound
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if err = q.Close(); err == nil {
				break
			}
		}
		cqClosed <- err
	}()
	assert.NoError(t, <-epClosed)
	assert.NoError(t, <-cqClosed, "the queue closes once its endpoint has")
	assert.Zero(t, q.QueuedRecvs())
}
