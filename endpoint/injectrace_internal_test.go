package endpoint

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// TestInjectRacingCloseIsCounted: an inject the provider took while Close
// tears the endpoint down (its post returned, the core has not counted it
// yet, the guard still held) is counted in InjectsUnconfirmed: the
// teardown counts what the provider holds inside the guard's exclusive
// section, after every post in progress. The fault hook stands for a
// provider that took the inject and holds it: it returns success without
// posting, so the send counter never counts it as sent.
func TestInjectRacingCloseIsCounted(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	entered, proceed := make(chan struct{}), make(chan struct{})
	s.c.SetInjectFunc(func(*fabric.Endpoint, uint32, int) fabric.Errno {
		close(entered)
		<-proceed
		return 0 // taken and held: never counted as sent
	})
	sent := make(chan netio.Status, 1)
	go func() { sent <- r.send(s, 0, 64) }()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.Eventually(t, s.c.Ended, 10*time.Second, time.Millisecond, "the teardown has begun")
	time.Sleep(50 * time.Millisecond) // and waits for the post in progress
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a post held the guard", err)
	default:
	}
	close(proceed)
	assert.Equal(t, netio.OK, <-sent)
	require.NoError(t, <-closed)
	assert.Equal(t, uint64(1), s.Stats().InjectsUnconfirmed, "the inject the provider held at the close")
}

// TestRefusedHandOffKeepsTheCount: a handed-off send the provider refuses
// for good is reported Failed without ever being pending, so it must not
// lower the count of regular sends pending: a regular send the provider
// holds at Close is not taken for an unconfirmed inject afterwards. The
// fault hook refuses the first post (EINVAL) and takes the second without
// posting it (held: never counted sent, never completed).
func TestRefusedHandOffKeepsTheCount(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, HandOffSize)
	post := s.c.PostFunc()
	var calls atomic.Int32
	s.c.SetPostFunc(func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
		switch calls.Add(1) {
		case 1:
			return fabric.EINVAL
		case 2:
			return 0
		}
		return post(ep, key, n)
	})
	require.Equal(t, netio.OK, r.send(s, 0, HandOffSize), "handed off")
	require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.statuses[netio.Failed] == 1 },
		10*time.Second, time.Millisecond, "the refused send reported Failed")
	require.Equal(t, netio.OK, r.send(s, 1, HandOffSize))
	require.Eventually(t, func() bool { return calls.Load() == 2 }, 10*time.Second, time.Millisecond, "the second posted")
	require.NoError(t, s.Close())
	assert.Zero(t, s.Stats().InjectsUnconfirmed, "the send held at Close is a regular one, reported Canceled")
	r.mu.Lock()
	assert.Equal(t, 1, r.statuses[netio.Canceled])
	r.mu.Unlock()
}

// TestFlushedRegularSendIsNotUnconfirmed: a regular send tcp flushed on a
// broken connection completes FI_ECANCELED, and tcp never counts it in the
// send counter; read before the teardown, it must not be taken for an
// inject the provider still holds. The fault hook takes the send without
// posting it, and the test delivers the flushed completion.
func TestFlushedRegularSendIsNotUnconfirmed(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	post := s.c.PostFunc()
	var held atomic.Int64
	held.Store(-1)
	s.c.SetPostFunc(func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
		if held.CompareAndSwap(-1, int64(key)) {
			return 0 // taken, never sent
		}
		return post(ep, key, n)
	})
	require.Equal(t, netio.OK, r.send(s, 0, injectTestBuf), "a regular send: past the inject size")
	require.GreaterOrEqual(t, held.Load(), int64(0))
	poll.Of(r.p).Do(func() {
		(*bufferedKind)(s).HandleCompletion(uint32(held.Load()), poll.Result{Status: netio.Canceled, Errno: fabric.ECANCELED, Flags: fabric.FlagSend})
	})
	r.mu.Lock()
	assert.Equal(t, 1, r.statuses[netio.Canceled], "reported Canceled")
	r.mu.Unlock()
	require.NoError(t, s.Close())
	assert.Zero(t, s.Stats().InjectsUnconfirmed, "the flushed send is no inject held")
}
