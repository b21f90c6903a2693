package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/sendbuf"
)

// fakePeer is a bufferSender with window buffers that records every send
// and completes them when told; failAt > 0 fails the failAt-th send.
type fakePeer struct {
	mu       sync.Mutex
	free     int
	sends    int
	inFlight int
	failAt   int
	failWith netio.Status
	refuse   int // refuse this many sends with NoResources, then take them
}

func (f *fakePeer) GetBuffer() *sendbuf.NetworkBuffer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free == 0 {
		return nil
	}
	f.free--
	return &sendbuf.NetworkBuffer{}
}

func (f *fakePeer) SendBuffer(*sendbuf.NetworkBuffer, int) netio.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAt > 0 && f.sends+1 == f.failAt {
		return f.failWith
	}
	if f.refuse > 0 {
		f.refuse--
		return netio.NoResources
	}
	f.sends++
	f.inFlight++
	return netio.OK
}

func (f *fakePeer) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free++
	return id, netio.OK
}

// complete finishes one send in flight, as a completion would, and
// reports whether there was one.
func (f *fakePeer) complete() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == 0 {
		return false
	}
	f.inFlight--
	f.free++
	return true
}

// newRefill returns a refilling sender of window buffers on a fake peer.
func newRefill(window int) (*fakePeer, *sender, *rdmRefill) {
	f := &fakePeer{free: window}
	s := newSender(64, nil)
	s.setWindow(window)
	s.to = f
	r := &rdmRefill{s: s}
	s.refill = r
	return f, s, r
}

// TestRDMRefillSendsExactlyCount: completions delivered on another
// goroutine refill the window while the sending goroutine runs; together
// they post exactly count messages and leave every buffer free.
func TestRDMRefillSendsExactlyCount(t *testing.T) {
	const window, count = 4, 5000
	f, s, r := newRefill(window)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { // the poller: completes what is in flight
		defer close(done)
		for ctx.Err() == nil && s.done() < count {
			if f.complete() {
				s.rdmCompletion()(0, netio.OK)
			} else {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	require.NoError(t, r.run(ctx, count))
	waits := s.waits
	require.NoError(t, s.drain(ctx))
	<-done
	assert.LessOrEqual(t, waits, uint64(2), "the sending goroutine slept until the callback needed it, not on a timer")
	assert.Equal(t, uint64(count), s.sent.Load())
	assert.Equal(t, count, f.sends)
	assert.Equal(t, uint64(count), s.completed.Load())
	assert.Equal(t, window, f.free, "every buffer back")
}

// TestRDMRefillReportsFailedPost: a post the endpoint refuses for good
// ends run with its error, the message not counted sent and its buffer
// given back; a refusal for now (NoResources) is retried.
func TestRDMRefillReportsFailedPost(t *testing.T) {
	for _, st := range []netio.Status{netio.Failed, netio.Closed} {
		t.Run(st.String(), func(t *testing.T) {
			f := &fakePeer{free: 8, failAt: 3, failWith: st}
			s := newSender(64, nil)
			s.setWindow(8)
			s.to = f
			r := &rdmRefill{s: s}
			err := r.run(t.Context(), 100)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "send of message 2")
			assert.Equal(t, uint64(2), s.sent.Load())
			assert.Equal(t, 6, f.free, "the refused message's buffer is back")
		})
	}
	f := &fakePeer{free: 8, failAt: 3, failWith: netio.NoResources}
	s := newSender(64, nil)
	s.setWindow(8)
	s.to = f
	r := &rdmRefill{s: s}
	go func() { // the provider takes the third send once a little time passed
		time.Sleep(5 * time.Millisecond)
		f.mu.Lock()
		f.failAt = 0
		f.mu.Unlock()
	}()
	require.NoError(t, r.run(t.Context(), 5))
	assert.Equal(t, 5, f.sends)
}

// TestRDMRefillHandsRefusedPostToGoroutine: a refill the endpoint refuses
// for now (NoResources) in the completion callback wakes the sending
// goroutine, asleep with the window full, which posts the message itself;
// every message goes out once.
func TestRDMRefillHandsRefusedPostToGoroutine(t *testing.T) {
	const window, count = 4, 5
	f, s, r := newRefill(window)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- r.run(ctx, count) }()
	for s.sent.Load() < window || len(s.freed) > 0 {
		time.Sleep(time.Millisecond) // the goroutine fills the window, then sleeps
	}
	f.mu.Lock()
	f.refuse = 1
	f.mu.Unlock()
	require.True(t, f.complete())
	s.rdmCompletion()(0, netio.OK) // the refill is refused: the goroutine must post it
	require.NoError(t, <-errc)
	f.mu.Lock()
	assert.Equal(t, window+1, f.sends, "the goroutine posted the refused message; the window was full again after it")
	f.mu.Unlock()
	for f.complete() {
		s.rdmCompletion()(0, netio.OK)
	}
	assert.Equal(t, count, f.sends, "every message sent once")
	assert.Equal(t, uint64(count), s.sent.Load())
}

// TestRDMRefillSizes: the rdm client refills from its completions for
// buffered messages up to ofi_rxm's eager size only.
func TestRDMRefillSizes(t *testing.T) {
	for _, c := range []struct {
		size   int
		inject bool
		want   bool
	}{{64, false, true}, {4096, false, true}, {16 << 10, false, true}, {16<<10 + 1, false, false}, {64 << 10, false, false}, {64, true, false}} {
		o := clientOptions{size: c.size}
		o.inject = c.inject
		assert.Equal(t, c.want, refills(o), "size %d, inject %v", c.size, c.inject)
	}
}
