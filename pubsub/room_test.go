package pubsub_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/pubsub"
)

// roomModes are the modes whose Block refusals WaitRoom is tested on:
// Shared (a post queued on the session) and Buffered (the pending slot).
var roomModes = []struct {
	name string
	mode pubsub.Mode
}{{"shared", pubsub.Shared}, {"buffered", pubsub.Buffered}}

// refusedPublisher starts a Block publisher of tag 1 and the other tags
// in mode with 4 send buffers of 64 KiB and one subscriber of them all
// that stops reading at its first message until release is closed, and
// publishes 48 KiB messages on tag 1 until
// Publish refuses (the subscriber's connection is full and a message
// waits for it; refused.wait tells whether that stands).
func refusedPublisher(t *testing.T, mgr *domain.Manager, mode pubsub.Mode, release <-chan struct{}, other ...uint64) *refused {
	t.Helper()
	tags := append([]uint64{1}, other...)
	cfg := smallShared(tags, pubsub.Block)
	cfg.Mode = mode
	p := newPublisher(t, mgr, cfg)
	c := newCollector()
	stallUntil(c, release)
	scfg := c.config(p.Addr())
	scfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 4}
	sub := newSubscriber(t, mgr, scfg)
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tags...))
	pending := func() bool { si := p.Subscribers(); return len(si) == 1 && si[0].Pending }
	return &refused{p: p, sub: sub, c: c, taken: publishUntilRefused(t, p, 1, 0, pending), pending: pending}
}

// publishUntilRefused publishes 48 KiB messages on tag, numbered from
// taken, until Publish refuses (refused for 100 ms and pending says a
// message waits), and returns the number of the next message.
func publishUntilRefused(t *testing.T, p *pubsub.Publisher, tag, taken uint64, pending func() bool) uint64 {
	t.Helper()
	buf := make([]byte, 48<<10)
	publish := func() bool {
		if p.Publish(tag, payload(buf, tag, taken)) == pubsub.NoResources {
			return false
		}
		taken++
		p.Flush()
		return true
	}
	require.True(t, testpattern.UntilRefused(time.Now().Add(30*time.Second), 100*time.Millisecond, publish, pending),
		"never refused for good, a message waiting, after %d messages: %+v %+v", taken, p.Stats(), p.Subscribers())
	return taken
}

// flushUntil flushes p until cond holds (30 s at most). One Flush is not
// enough under Block with a long FlushInterval: a message still waiting
// for its subscriber (Pending) goes into a buffer after the Flush, and
// that buffer would wait for the interval.
func flushUntil(t *testing.T, p *pubsub.Publisher, cond func() bool, format string, args ...any) {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool { p.Flush(); return cond() }, format, args...)
}

// waitRoomAsync runs WaitRoom(ctx, tag) on its own goroutine and returns
// where its answer goes, once the call sleeps (RoomSleeps counts it) or
// has answered without sleeping (the refusal ended before the call).
func waitRoomAsync(t *testing.T, ctx context.Context, p *pubsub.Publisher, tag uint64) <-chan error {
	t.Helper()
	sleeps := p.Stats().RoomSleeps
	done := make(chan error, 1)
	go func() { done <- p.WaitRoom(ctx, tag) }()
	waitFor(t, 10*time.Second, func() bool { return p.Stats().RoomSleeps > sleeps || len(done) > 0 }, "WaitRoom to sleep")
	return done
}

// wokenBy checks that the WaitRoom call answering on done (from heldWait:
// it slept past a few housekeeping ticks) returns nil once release made
// room (what says how), and returns the publisher's counters from before
// release.
func wokenBy(t *testing.T, p *pubsub.Publisher, done <-chan error, release func(), what string) pubsub.PublisherStats {
	t.Helper()
	before := p.Stats()
	release()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("WaitRoom not woken by %s", what)
	}
	return before
}

// TestWaitRoomWakesOnRoom: WaitRoom sleeps while the refusing subscriber
// does not read (its message stays pending) and returns once it reads
// again and its connection has room; Publish then takes the message, and
// the subscriber gets everything in order.
func TestWaitRoomWakesOnRoom(t *testing.T) {
	for _, m := range roomModes {
		t.Run(m.name, func(t *testing.T) {
			mgr := openDomain(t, "tcp")
			stalled := make(chan struct{})
			release := sync.OnceFunc(func() { close(stalled) })
			// A failed assertion must not leave the subscriber's poller
			// stalled: deferred, release runs before the cleanups that close
			// the subscriber.
			defer release()
			r := refusedPublisher(t, mgr, m.mode, stalled)
			p, c := r.p, r.c
			// A stalled subscriber makes no room: the call must still sleep
			// after the housekeeping ticks that let go of refusals with room.
			done := r.wait(t, ctxT(t, 30*time.Second))
			taken := r.taken
			before := wokenBy(t, p, done, release, "the subscriber reading again")
			after := p.Stats()
			assert.Greater(t, after.RoomWakes+after.RoomTickWakes, before.RoomWakes+before.RoomTickWakes, "returned without a wake")
			buf := make([]byte, 48<<10)
			require.Equal(t, pubsub.OK, p.Publish(1, payload(buf, 1, taken)), "no room after WaitRoom")
			flushUntil(t, p, func() bool { return c.count.Load() == int64(taken+1) }, "%d messages", taken+1)
			checkInOrder(t, c, 1, 0, taken+1)
			assert.Empty(t, c.problems())
		})
	}
}

// TestWaitRoomClose: Close wakes a caller waiting for a subscriber that
// does not read, with an error matching netio.ErrClosed; later calls
// answer the same at once.
func TestWaitRoomClose(t *testing.T) {
	mgr := openDomain(t, "tcp")
	release := make(chan struct{})
	defer close(release)
	r := refusedPublisher(t, mgr, pubsub.Shared, release)
	p := r.p
	done := r.wait(t, ctxT(t, 30*time.Second))
	require.NoError(t, p.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, netio.ErrClosed)
	case <-time.After(20 * time.Second):
		t.Fatal("WaitRoom not woken by Close")
	}
	assert.ErrorIs(t, p.WaitRoom(context.Background(), 1), netio.ErrClosed)
}

// TestWaitRoomUnsubscribe: the refusing subscriber unsubscribing from the
// tag ends its refusal, which wakes the waiting caller, though it stays
// subscribed to another tag and still does not read; Publish then answers
// NoSubscriptions instead of NoResources.
func TestWaitRoomUnsubscribe(t *testing.T) {
	mgr := openDomain(t, "tcp")
	release := make(chan struct{})
	defer close(release)
	r := refusedPublisher(t, mgr, pubsub.Shared, release, 2)
	p := r.p
	done := r.wait(t, ctxT(t, 30*time.Second))
	require.NoError(t, r.sub.Unsubscribe(ctxT(t, 10*time.Second), 1))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("WaitRoom not woken when the refusing subscriber unsubscribed")
	}
	assert.Equal(t, pubsub.NoSubscriptions, p.Publish(1, make([]byte, 64)))
	assert.Equal(t, 1, p.Stats().Subscribers, "the subscriber left: its refusal ended with it")
}

// TestWaitRoomContext: a waiting caller returns its context's cause when
// it ends, and a call with nothing refused returns nil at once, without
// allocating.
func TestWaitRoomContext(t *testing.T) {
	mgr := openDomain(t, "tcp")
	release := make(chan struct{})
	defer close(release)
	r := refusedPublisher(t, mgr, pubsub.Shared, release)
	cause := errors.New("run over")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := r.wait(t, ctx)
	cancel(cause)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, cause)
	case <-time.After(20 * time.Second):
		t.Fatal("WaitRoom not ended by its context")
	}

	idle := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1}, Mode: pubsub.Shared})
	ctx2 := context.Background()
	assert.NoError(t, idle.WaitRoom(ctx2, 1), "nothing refused")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = idle.WaitRoom(ctx2, 1) }))
	assert.Zero(t, idle.Stats().RoomSleeps)
}

// TestWaitRoomBatches: a publisher that waits in WaitRoom whenever its
// subscriber, which takes a millisecond per message, refuses is woken at
// most once per half of its send buffers (one message each), not once per
// completion, and nothing is lost.
func TestWaitRoomBatches(t *testing.T) {
	const messages, bufs = 400, 8
	for _, m := range roomModes {
		t.Run(m.name, func(t *testing.T) {
			mgr := openDomain(t, "tcp")
			p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1}, Mode: m.mode, Policy: pubsub.Block,
				FlushInterval: time.Minute, Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: bufs}})
			c := newCollector()
			c.stall = func() { time.Sleep(time.Millisecond) }
			cfg := c.config(p.Addr())
			cfg.Receive = netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 2}
			sub := newSubscriber(t, mgr, cfg)
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
			ctx := ctxT(t, 60*time.Second)
			buf := make([]byte, 48<<10) // one message a buffer: a buffer sent per Publish
			start := time.Now()
			for seq := range uint64(messages) {
				for p.Publish(1, payload(buf, 1, seq)) == pubsub.NoResources {
					require.NoError(t, p.WaitRoom(ctx, 1), "seq %d", seq)
				}
			}
			elapsed := time.Since(start)
			flushUntil(t, p, func() bool { return c.count.Load() == messages }, "%d messages", messages)
			checkInOrder(t, c, 1, 0, messages)
			st := p.Stats()
			require.NotZero(t, st.RoomSleeps, "never waited: the subscriber kept up, the test shows nothing")
			assert.NotZero(t, st.RoomWakes, "no wake from a send completion: %+v", st)
			// A wake per completion would give one per message once the
			// socket is full. The batch is bufs/2 completions; the
			// housekeeping tick (5 ms) lets a refusal go sooner when no
			// completion came over a whole tick, at most once per tick.
			ticks := uint64(elapsed/(5*time.Millisecond)) + 1
			assert.LessOrEqual(t, st.RoomTickWakes, ticks, "%+v", st)
			assert.LessOrEqual(t, st.RoomWakes, uint64(messages/(bufs/2)+1), "wakes for %d sends in %v: %+v", messages, elapsed, st)
			t.Logf("%d messages in %v: %d sleeps, %d wakes, %d by the tick", messages, elapsed, st.RoomSleeps, st.RoomWakes, st.RoomTickWakes)
		})
	}
}

// TestWaitRoomOnPoller: called from a callback on the publisher's poller
// goroutine (here a subscriber's OnMessage, the two sharing one poller),
// WaitRoom answers ErrWaitOnPoller at once instead of waiting for
// completions that poller would run.
func TestWaitRoomOnPoller(t *testing.T) {
	mgr := openDomain(t, "tcp")
	poller, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, poller.Close()) }) // after the publisher and subscriber: cleanups run in reverse
	cfg := pubsub.PublisherConfig{Tags: []uint64{1}}
	cfg.Poller = poller
	p := newPublisher(t, mgr, cfg)
	got := make(chan error, 1)
	scfg := pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()), OnMessage: func(pubsub.Message) {
		select {
		case got <- p.WaitRoom(context.Background(), 1):
		default:
		}
	}}
	scfg.Poller = poller
	require.NoError(t, newSubscriber(t, mgr, scfg).Subscribe(ctxT(t, 10*time.Second), 1))
	require.Equal(t, pubsub.OK, p.Publish(1, make([]byte, 64)))
	p.Flush()
	select {
	case err := <-got:
		assert.ErrorIs(t, err, pubsub.ErrWaitOnPoller)
	case <-time.After(20 * time.Second):
		t.Fatal("the message never came")
	}
}

// TestWaitRoomPool: Block subscribers that stopped reading empty the
// Shared pool, so Publish on a tag of its own answers NoResources for the
// pool; WaitRoom sleeps until they read again, and the buffers that come
// back wake it (not the housekeeping tick's let-go); Publish then takes
// the message.
func TestWaitRoomPool(t *testing.T) {
	const size = 48 << 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, smallShared([]uint64{1, 2, 3}, pubsub.Block))
	_, _, release := stalledTwo(t, mgr, p)
	buf := make([]byte, size)
	var next uint64 // tag 3's next message
	refuse := func() {
		fillPool(t, p, buf, poolEmptyFor(p, 200*time.Millisecond))
		// Refused, it takes nothing: next is still tag 3's next.
		require.Equal(t, pubsub.NoResources, p.Publish(3, payload(buf, 3, next)), "%+v", p.Stats())
	}
	retake := func() bool {
		if p.Publish(3, payload(buf, 3, next)) != pubsub.OK {
			return false
		}
		next++
		p.Flush()
		return true
	}
	refuse()
	done := heldWait(t, ctxT(t, 30*time.Second), p, 3, retake, refuse)
	before := wokenBy(t, p, done, release, "the buffers coming back")
	assert.Greater(t, p.Stats().RoomWakes, before.RoomWakes, "not woken by a buffer given back: %+v", p.Stats())
	require.Equal(t, pubsub.OK, publishAll(t, p, 3, buf, next, time.Now().Add(20*time.Second)))
}

// TestWaitRoomZeroCopyPool: in ZeroCopy mode a subscriber that stopped
// reading holds every publish in flight (MaxInFlight 4), so
// PublishZeroCopy answers NoResources for the pool; WaitRoom sleeps until
// it reads again, and the publishes that complete wake it.
func TestWaitRoomZeroCopyPool(t *testing.T) {
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{1}, Mode: pubsub.ZeroCopy, Policy: pubsub.Drop, MaxInFlight: 4})
	stalled := make(chan struct{})
	release := sync.OnceFunc(func() { close(stalled) })
	defer release()
	c := newCollector()
	stallUntil(c, stalled)
	sub := newSubscriber(t, mgr, c.config(p.Addr()))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))
	data := make([]byte, 48<<10) // never written while in flight
	key := publishZeroCopyUntilRefused(t, p, data, 0)
	retake := func() bool {
		if p.PublishZeroCopy(1, 0, data, key) == pubsub.NoResources {
			return false
		}
		key++
		return true
	}
	refuse := func() { key = publishZeroCopyUntilRefused(t, p, data, key) }
	done := heldWait(t, ctxT(t, 30*time.Second), p, 1, retake, refuse)
	before := wokenBy(t, p, done, release, "the publishes completing")
	assert.Greater(t, p.Stats().RoomWakes, before.RoomWakes, "not woken by a completed publish: %+v", p.Stats())
	assert.NotEqual(t, pubsub.NoResources, p.PublishZeroCopy(1, 0, data, key))
}
