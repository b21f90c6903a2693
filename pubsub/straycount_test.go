package pubsub_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pubsub"
)

// A stray data connection whose buffers arrive together is counted and
// closed once: the buffers the provider placed behind the first, which
// the close still delivers (endpoint.ReceiveEndpoint.Close), are ignored.
// The subscriber's poller is held in OnMessage while the stray
// connection's burst reaches its socket, so that its next read places the
// whole burst at once.
func TestStrayBurstCountedOnce(t *testing.T) {
	const burst = 8
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1}})
	held, release := make(chan struct{}), make(chan struct{})
	sub := newSubscriber(t, mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()),
		OnMessage: func(pubsub.Message) {
			select {
			case <-held:
			default:
				close(held)
				<-release // hold the poller once
			}
		}})
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
	// Connected before the poller is held: accepting takes the poller.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ep, err := endpoint.Dial(ctx, mgr, sub.DataAddr(), endpoint.SendConfig{Coalesce: &endpoint.CoalesceConfig{}})
	cancel()
	require.NoError(t, err)
	defer func() { assert.NoError(t, ep.Close()) }()
	require.Equal(t, pubsub.OK, publishAll(t, p, 1, make([]byte, 64), 0, time.Now().Add(30*time.Second)))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		close(release)
		require.FailNow(t, "the message never reached OnMessage")
	}

	for range burst {
		assert.Equal(t, netio.OK, ep.SendMessage(5, []byte("not a HELLO")))
		assert.Equal(t, netio.OK, ep.Flush())
	}
	time.Sleep(100 * time.Millisecond) // the burst reaches the subscriber's socket
	close(release)

	waitFor(t, 10*time.Second, func() bool { return sub.Stats().Buffers >= 1+burst }, "the burst delivered")
	assert.Equal(t, uint64(1), sub.Stats().StrayConns, "the stray connection counted once")
}
