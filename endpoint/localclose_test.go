package endpoint_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// placedCount is how many messages the sender posts in TestLocalCloseDeliversPlaced:
// more than a batch of completions (fabric.MaxBatch, 64), so that some of
// those placed before the close wait in the completion queue, and the rest
// in the batch the poller is delivering.
const placedCount = 100

// closeRig is a tcp connection whose receiving side closes itself, from
// OnData, at the second message: the first message's OnData holds the
// poller until the sender has posted every message, so the poller's next
// read finds them all in the socket and places them at once (tcp 1.17
// receives while the socket is readable, and acknowledges each message to
// a DeliveryComplete sender as it writes its completion). Every message
// after the second is then placed and acknowledged, but not yet delivered,
// when the connection closes.
type closeRig struct {
	mu        sync.Mutex
	delivered map[byte]bool
	ok        map[byte]bool // reported OK to the sender
	reports   chan struct{}
	closed    chan error
	posted    chan struct{} // closed once the sender has posted every message
	afterEnd  int           // messages delivered after OnConnectionClosed
	ended     bool
}

func newCloseRig() *closeRig {
	return &closeRig{delivered: map[byte]bool{}, ok: map[byte]bool{}, reports: make(chan struct{}, placedCount),
		closed: make(chan error, 1), posted: make(chan struct{})}
}

// listenConfig closes the connection with closeFn at the second message.
func (c *closeRig) listenConfig(poller *cq.Poller, closeFn func(ep *endpoint.ReceiveEndpoint)) endpoint.ListenConfig {
	cfg := endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: 64, BufferCount: 2 * placedCount},
		OnData: func(ep *endpoint.ReceiveEndpoint, data []byte) {
			c.mu.Lock()
			c.delivered[data[0]] = true
			n := len(c.delivered)
			if c.ended {
				c.afterEnd++
			}
			c.mu.Unlock()
			switch n {
			case 1:
				<-c.posted // hold the poller: the rest arrives in one piece
			case 2:
				closeFn(ep)
			}
		},
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			c.mu.Lock()
			c.ended = true
			c.mu.Unlock()
			c.closed <- err
		},
	}
	cfg.Poller = poller
	return cfg
}

// send posts placedCount messages, each naming itself in its first byte,
// with DeliveryComplete, and waits for every report.
func (c *closeRig) send(t *testing.T, mgr *domain.Manager, addr string) {
	t.Helper()
	cfg := endpoint.SendConfig{
		Params:           netio.BufferedSendParams{BufferSize: 64, BufferCount: placedCount},
		DeliveryComplete: true,
		OnSendCompleted: func(key uint64, st netio.Status) {
			c.mu.Lock()
			if st == netio.OK {
				c.ok[byte(key)] = true
			}
			c.mu.Unlock()
			c.reports <- struct{}{}
		},
	}
	s := dial(t, mgr, addr, cfg)
	for i := range placedCount {
		buf := s.GetBuffer()
		require.NotNil(t, buf)
		buf.Bytes()[0] = byte(buf.ID())
		require.Equal(t, netio.OK, s.SendBuffer(buf, 64), "message %d", i)
	}
	// Let the last bytes reach the receiver's socket before its poller
	// reads on. Were they late, fewer messages would be placed before the
	// close (the test would prove less, but not fail).
	time.Sleep(20 * time.Millisecond)
	close(c.posted)
	for range placedCount {
		recvValue(t, c.reports, 30*time.Second, "send report")
	}
}

// check asserts that every message reported OK was delivered, before
// OnConnectionClosed.
func (c *closeRig) check(t *testing.T) {
	t.Helper()
	assert.ErrorIs(t, recvErr(t, c.closed, 30*time.Second, "OnConnectionClosed"), netio.ErrClosed)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Greater(t, len(c.ok), 2, "messages acknowledged after the close began: none, the test proved nothing")
	var lost []int
	for key := range c.ok {
		if !c.delivered[key] {
			lost = append(lost, int(key))
		}
	}
	slices.Sort(lost)
	assert.Empty(t, lost, "reported OK to the sender (%d of %d), never delivered", len(c.ok), placedCount)
	assert.Zero(t, c.afterEnd, "messages delivered after OnConnectionClosed")
}

// A local close of a receiving connection (ReceiveEndpoint.Close, here
// from OnData) delivers the messages the provider had placed in its
// receive buffers before the close, and acknowledged to a DeliveryComplete
// sender, before OnConnectionClosed: every message reported OK to the
// sender reaches OnData. Before, the close dropped their completions and
// the sender's OK was a lie (the large soak lost up to 48 per stream
// at a listener restart).
func TestLocalCloseDeliversPlaced(t *testing.T) {
	mgr := openDomain(t, "tcp")
	c := newCloseRig()
	l := listen(t, mgr, c.listenConfig(nil, func(ep *endpoint.ReceiveEndpoint) { assert.NoError(t, ep.Close()) }))
	c.send(t, mgr, l.Addr())
	c.check(t)
}

// Listener.Close from a callback, on a shared poller that goes on
// running, delivers what each connection had placed too.
func TestListenerCloseDeliversPlaced(t *testing.T) {
	mgr := openDomain(t, "tcp")
	poller, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, poller.Close()) }()
	c := newCloseRig()
	var lp atomic.Pointer[endpoint.Listener]
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", c.listenConfig(poller, func(*endpoint.ReceiveEndpoint) { assert.NoError(t, lp.Load().Close()) }))
	require.NoError(t, err)
	lp.Store(l)
	c.send(t, mgr, l.Addr())
	c.check(t)
	assert.NoError(t, l.Close())
}
