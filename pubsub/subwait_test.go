package pubsub_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// movingBus is a Bus whose one publisher's address the test changes.
type movingBus struct{ addr atomic.Pointer[string] }

var _ pubsub.Bus = (*movingBus)(nil)

func (b *movingBus) Lookup(uint64) (string, error) { return *b.addr.Load(), nil }

func (*movingBus) Announce(string, string, []uint64) error { return nil }

func (*movingBus) Withdraw(string) error { return nil }

// deadAddress returns an address on which nothing listens.
func deadAddress(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestSubscribeFollowsMoveThenFails: a Subscribe waiting on an
// unreachable publisher follows its tag when the resolver moves it to
// another (also unreachable) one, fails when its ctx ends (not with
// ErrCanceled at the move), and then leaves the tag subscribed nowhere:
// withdrawn from the session it ended up at, which ends.
func TestSubscribeFollowsMoveThenFails(t *testing.T) {
	mgr := openDomain(t, "tcp")
	deadA, deadB := deadAddress(t), deadAddress(t)
	bus := &movingBus{}
	bus.addr.Store(&deadA)
	col := newCollector()
	cfg := col.config("")
	cfg.Bus, cfg.ResolveInterval = bus, 20*time.Millisecond
	sub := newSubscriber(t, mgr, cfg)

	// Move the tag once Subscribe waits at A's session, so that the
	// follow is what is tested, and give the resolver seconds to see it.
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if slices.Contains(sub.Publishers(), deadA) {
				break
			}
		}
		bus.addr.Store(&deadB)
	}()
	defer func() { <-waiting }()
	err := sub.Subscribe(ctxT(t, 3*time.Second), 1)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, netio.ErrCanceled)
	assert.Contains(t, err.Error(), deadB, "the wait followed the tag to B")
	_, ok := sub.TagStats(1)
	assert.False(t, ok, "a failed Subscribe leaves the tag subscribed nowhere")
	assert.Empty(t, sub.Subscribed())
	waitFor(t, 5*time.Second, func() bool { return len(sub.Publishers()) == 0 }, "both sessions to end (now %v)", sub.Publishers())
}

// tagBus is a Bus with an address per tag, which the test changes.
type tagBus struct {
	mu   sync.Mutex
	addr map[uint64]string
}

var _ pubsub.Bus = (*tagBus)(nil)

func (b *tagBus) Lookup(tag uint64) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr[tag], nil
}

func (b *tagBus) move(tag uint64, addr string) {
	b.mu.Lock()
	b.addr[tag] = addr
	b.mu.Unlock()
}

func (*tagBus) Announce(string, string, []uint64) error { return nil }

func (*tagBus) Withdraw(string) error { return nil }

// A failed Subscribe of tags at two publishers withdraws a tag the
// resolver moved while the wait was at the other publisher: it is
// withdrawn from where it is then, not from where it was added, and no
// session is left (before, tag 2 stayed subscribed at C in most runs).
func TestSubscribeFailsWithdrawsTagMovedInAnotherGroup(t *testing.T) {
	mgr := openDomain(t, "tcp")
	deadA, deadB, deadC := deadAddress(t), deadAddress(t), deadAddress(t)
	bus := &tagBus{addr: map[uint64]string{1: deadA, 2: deadB}}
	col := newCollector()
	cfg := col.config("")
	cfg.Bus, cfg.ResolveInterval = bus, 20*time.Millisecond
	sub := newSubscriber(t, mgr, cfg)

	moved := time.AfterFunc(100*time.Millisecond, func() { bus.move(2, deadC) })
	defer moved.Stop()
	require.Error(t, sub.Subscribe(ctxT(t, time.Second), 1, 2))
	for _, tag := range []uint64{1, 2} {
		_, ok := sub.TagStats(tag)
		assert.False(t, ok, "tag %d left subscribed", tag)
	}
	assert.Empty(t, sub.Subscribed())
	waitFor(t, 5*time.Second, func() bool { return len(sub.Publishers()) == 0 }, "every session to end (now %v)", sub.Publishers())
}
