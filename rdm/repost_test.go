package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/rdm"
)

// TestRepostRefusedIsReported: a receive buffer the provider will not take
// again (OnData fills tcp;ofi_rxm's receive queue, so that the poller's
// next read refuses the queued repost, Result.Unposted, and the retry at
// once is refused too) reaches OnReceiveError, saying the buffer is out of
// use, and is counted in ReceiveErrors.
func TestRepostRefusedIsReported(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	errs := make(chan error, 4)
	var filled atomic.Int64
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{
		OnData:         func(e *rdm.Endpoint, _ rdm.Peer, _ []byte) { filled.Store(int64(rdm.FillReceiveQueue(e))) },
		OnReceiveError: func(_ *rdm.Endpoint, err error) { errs <- err },
	})
	tx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
	send(t, tx, rx.Addr(), []byte("one"))
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, netio.ErrFailed)
		assert.ErrorIs(t, err, fabric.EAGAIN)
		assert.Contains(t, err.Error(), "stays out of use")
	case <-time.After(10 * time.Second):
		t.Fatal("the refused repost never reached OnReceiveError")
	}
	t.Logf("OnData posted %d receives before the provider refused one", filled.Load())
	assert.Positive(t, filled.Load(), "OnData filled the receive queue")
	assert.Equal(t, uint64(1), rx.Stats().ReceiveErrors)
	assert.Empty(t, errs, "one report")
}
