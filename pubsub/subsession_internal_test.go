package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// waitingForTag7 returns a bare session that wants tag 7, and the answer
// of a wait for it, started and given time to block (if it has not, it
// reads the state anyway). The wait ends at the latest when its 10 s ctx
// does, canceled at cleanup.
func waitingForTag7(t *testing.T) (*subSession, <-chan error) {
	ss := &subSession{want: map[uint64]bool{}, acked: map[uint64]bool{}, refused: map[uint64]bool{}, leaving: map[uint64]bool{},
		changed: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1)}
	ss.setWant(7, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	errc, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		errc <- ss.wait(ctx, []uint64{7})
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	time.Sleep(10 * time.Millisecond)
	return ss, errc
}

// TestWaitWokenWhenTagWithdrawn: a Subscribe waiting for a tag that is
// withdrawn (a concurrent Unsubscribe, a refusal) before its request went
// out returns ErrCanceled at once, not when its context ends.
func TestWaitWokenWhenTagWithdrawn(t *testing.T) {
	ss, errc := waitingForTag7(t)
	ss.setWant(7, false)
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, netio.ErrCanceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken when its tag was withdrawn")
	}
}

// TestStaleRefusalKeepsNewSubscribe: a publisher's refusal of a tag that
// reaches the subscriber after the tag was wanted again (the publisher
// serves it now) does not withdraw the new want: the tag gets subscribed.
func TestStaleRefusalKeepsNewSubscribe(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	p, err := NewPublisher(mgr, "127.0.0.1:0", PublisherConfig{Tags: []uint64{1}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, p.Close()) }()
	refusedCalls := make(chan []uint64, 4)
	s, err := NewSubscriber(mgr, SubscriberConfig{Bus: Fixed(p.Addr()), OnMessage: func(Message) {},
		OnRefused: func(_ string, tags []uint64) { refusedCalls <- tags }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	require.NoError(t, s.Subscribe(context.Background(), 1))

	// Want 4 (what SubscribeAsync(4) does) and keep s.mu: the session's
	// goroutine subscribes, records the publisher's refusal of 4, then
	// needs s.mu to withdraw it, and waits for this test.
	s.mu.Lock()
	ss := s.sessions[p.Addr()]
	if ss == nil {
		s.mu.Unlock()
		t.Fatal("no session with the publisher")
	}
	s.wantLocked(ss, []uint64{4})
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss.mu.Lock()
		refused := ss.refused[4]
		ss.mu.Unlock()
		if refused {
			break
		}
		if time.Now().After(deadline) {
			s.mu.Unlock()
			t.Fatal("tag 4 was not refused")
		}
		time.Sleep(time.Millisecond)
	}
	// Meanwhile a Subscribe(4) that saw the refusal withdrew the tag, the
	// publisher began to serve it, and another Subscribe(4) wants it again:
	// what they do under s.mu.
	s.unwantLocked(ss, []uint64{4})
	addErr := p.AddTags(4)
	s.wantLocked(ss, []uint64{4})
	s.mu.Unlock() // before any require: a deferred Close needs s.mu
	require.NoError(t, addErr)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.NoError(t, ss.wait(ctx, []uint64{4}), "the tag wanted again after its refusal")
	assert.Equal(t, []uint64{1, 4}, s.Subscribed())
	assert.Empty(t, refusedCalls, "OnRefused for a tag wanted again")
}

// TestWaitGoneBeatsSessionEnd: a tag moved away from a session that then
// ends (it carries nothing more) is reported gone (errGone, which
// Subscribe follows to the tag's new session), never as the session's
// end (ErrClosed, which would fail the Subscribe). In the race this
// stands for, the move's signal and the end both come while the waiter
// is between reading the state and its select, which then picks either
// at random; here the end comes alone, after the state changed, which is
// what the waiter sees when it picks the end.
func TestWaitGoneBeatsSessionEnd(t *testing.T) {
	ss, errc := waitingForTag7(t)
	ss.mu.Lock()
	delete(ss.want, 7) // moved away, its signal not seen
	ss.mu.Unlock()
	close(ss.done) // the idle session ended
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, errGone)
		assert.NotErrorIs(t, err, netio.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not return at the session's end")
	}
}
