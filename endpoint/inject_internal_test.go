package endpoint

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
)

// injectRig is a tcp domain, a poller the sender shares (so that a test
// can hold it), a listener that checks every message's sequence number
// and size, and a record of what the sender reported, by key.
type injectRig struct {
	mgr *domain.Manager
	p   *cq.Poller
	l   *Listener

	mu       sync.Mutex
	next     uint64         // the sequence number the receiver expects
	sizes    map[uint64]int // size sent, by sequence number
	badOrder int            // messages out of order, or of the wrong size
	inFlight map[uint64]int // sends not yet reported, by key (a key repeats once reported or injected)
	twice    int            // reports of a key with no send outstanding
	late     int            // reports after OnConnectionClosed
	reported []uint64       // keys, in the order reported
	statuses map[netio.Status]int
	closed   atomic.Int32 // OnConnectionClosed calls

	injects atomic.Int64 // calls of the inject post
	// afterReport, when set, runs after the n-th report is recorded, on the
	// goroutine that reported it.
	afterReport func(n int)
}

// injectTestBuf is the senders' buffer size, unless a test needs HandOffSize.
const injectTestBuf = 4096

func newInjectRig(t *testing.T) *injectRig {
	r := &injectRig{sizes: map[uint64]int{}, inFlight: map[uint64]int{}, statuses: map[netio.Status]int{}}
	r.mgr, r.p = tcpWithPoller(t)
	var err error
	r.l, err = Listen(r.mgr, "127.0.0.1:0", ListenConfig{
		Params: netio.ReceiveParams{BufferSize: HandOffSize, BufferCount: 16},
		OnData: r.onData,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.l.Close() })
	return r
}

// onData checks that message k carries sequence number k (in its first 8
// bytes, when it has them) and the size it was sent with.
func (r *injectRig) onData(_ *ReceiveEndpoint, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.next
	r.next++
	if len(b) >= 8 && binary.LittleEndian.Uint64(b) != k || len(b) != r.sizes[k] {
		r.badOrder++
	}
}

// dial opens a sender with Inject on the rig's poller, counting injects.
func (r *injectRig) dial(t *testing.T, bufs, size int) *SendEndpointBuffered {
	s, err := Dial(context.Background(), r.mgr, r.l.Addr(), SendConfig{
		Params:             netio.BufferedSendParams{BufferSize: size, BufferCount: bufs},
		Inject:             true,
		Runtime:            cq.Runtime{Poller: r.p},
		OnSendCompleted:    r.onCompleted,
		OnConnectionClosed: func(error) { r.closed.Add(1) },
	})
	require.NoError(t, err)
	inject := s.c.InjectFunc()
	require.NotNil(t, inject, "Inject on: the core has the kind's inject post")
	s.c.SetInjectFunc(func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
		r.injects.Add(1)
		return inject(ep, key, n)
	})
	return s
}

func (r *injectRig) onCompleted(key uint64, st netio.Status) {
	r.mu.Lock()
	if r.inFlight[key] == 0 {
		r.twice++
	}
	if r.closed.Load() > 0 {
		r.late++
	}
	r.inFlight[key]--
	r.reported = append(r.reported, key)
	r.statuses[st]++
	n, after := len(r.reported), r.afterReport
	r.mu.Unlock()
	if after != nil {
		after(n)
	}
}

// send sends message seq of size bytes: it takes a buffer (waiting for
// one), writes seq into it and records the send. It returns SendBuffer's
// status, retrying NoResources until deadline.
func (r *injectRig) send(s *SendEndpointBuffered, seq uint64, size int) netio.Status {
	deadline := time.Now().Add(10 * time.Second)
	buf := s.GetBuffer()
	for ; buf == nil; buf = s.GetBuffer() {
		if s.c.Ended() || time.Now().After(deadline) {
			return netio.Closed
		}
		time.Sleep(10 * time.Microsecond)
	}
	if size >= 8 {
		binary.LittleEndian.PutUint64(buf.Bytes(), seq)
	}
	for {
		r.mu.Lock()
		r.sizes[seq] = size
		r.inFlight[buf.ID()]++
		r.mu.Unlock()
		st := s.SendBuffer(buf, size)
		if st == netio.OK {
			return st
		}
		r.mu.Lock()
		r.inFlight[buf.ID()]--
		r.mu.Unlock()
		if st != netio.NoResources || time.Now().After(deadline) {
			_, _ = s.ReleaseBuffer(buf.ID())
			return st
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// allReceived waits until n messages have arrived, and checks that each
// came in order with the size it was sent with.
func (r *injectRig) allReceived(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.next == uint64(n) },
		10*time.Second, time.Millisecond, "every message received")
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.badOrder, "messages in order, each of its size")
}

// settled waits until every send is reported, then checks that none was
// reported twice and that the counters agree.
func (r *injectRig) settled(t *testing.T, s *SendEndpointBuffered, sent int) {
	t.Helper()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.reported) >= sent
	}, 20*time.Second, time.Millisecond, "every send reported")
	time.Sleep(20 * time.Millisecond) // a report twice would come now
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Len(t, r.reported, sent, "every key reported exactly once")
	assert.Zero(t, r.twice, "no key reported twice")
	assert.Zero(t, r.late, "every key reported before OnConnectionClosed")
	for key, n := range r.inFlight {
		assert.Zero(t, n, "key %d: sends minus reports", key)
	}
	st := s.Stats()
	assert.Equal(t, uint64(sent), st.Sent)
	assert.Equal(t, uint64(sent), st.Completed+st.Failed)
	assert.Equal(t, uint64(r.statuses[netio.OK]), st.Completed)
}

// Every injected send reaches the peer in order, its key is reported
// once, OK, in the order of the sends, and its buffer is free when
// SendBuffer returns. The poller is held while sending, so that every
// report waits in the queue and their order shows.
func TestInjectReportsEveryKeyOnceInOrder(t *testing.T) {
	r := newInjectRig(t)
	const bufs, sends = 256, 1000 // the report queue holds InjectQueueFactor × bufs
	s := r.dial(t, bufs, injectTestBuf)
	defer func() { assert.NoError(t, s.Close()) }()
	require.GreaterOrEqual(t, s.InjectSize(), 64, "tcp's inject_size")

	release := r.hold()
	var order []uint64
	for k := range uint64(sends) {
		buf := s.GetBuffer()
		require.NotNil(t, buf, "send %d: an injected send's buffer is free at once", k)
		binary.LittleEndian.PutUint64(buf.Bytes(), k)
		r.mu.Lock()
		r.sizes[k] = 64
		r.inFlight[buf.ID()]++
		r.mu.Unlock()
		st := s.SendBuffer(buf, 64)
		for st == netio.NoResources { // the provider's transmit queue is full
			time.Sleep(10 * time.Microsecond)
			st = s.SendBuffer(buf, 64)
		}
		require.Equal(t, netio.OK, st)
		order = append(order, buf.ID())
	}
	assert.Empty(t, s.PendingSends(), "nothing waits for a provider completion")
	release()
	r.settled(t, s, sends)
	r.allReceived(t, sends)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Equal(t, order, r.reported, "keys reported in the order of the sends")
	assert.Equal(t, map[netio.Status]int{netio.OK: sends}, r.statuses)
	assert.Equal(t, int64(sends), r.injects.Load(), "every send injected")
}

// A stream of injected sends with few buffers: every message arrives in
// order and every key is reported once, whether it was injected or, with
// the report queue full, posted with a completion.
func TestInjectStream(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	defer func() { assert.NoError(t, s.Close()) }()
	const sends = 5000
	for k := range sends {
		require.Equal(t, netio.OK, r.send(s, uint64(k), 64), "send %d", k)
	}
	r.settled(t, s, sends)
	r.allReceived(t, sends)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Equal(t, map[netio.Status]int{netio.OK: sends}, r.statuses)
	assert.Positive(t, r.injects.Load())
}

// Injected and regular sends mixed (sizes around the inject size, and
// queued behind a send handed to the poller) reach the peer in the order
// sent; every key is reported once.
func TestInjectMixedWithRegularSends(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 8, injectTestBuf)
	defer func() { assert.NoError(t, s.Close()) }()
	inj := s.InjectSize()
	require.Positive(t, inj)
	sizes := []int{inj, inj + 1, 0, injectTestBuf, 8, inj - 1, 1000}
	const sends = 2100
	small := 0
	for k := range sends {
		size := sizes[k%len(sizes)]
		if size <= inj {
			small++
		}
		require.Equal(t, netio.OK, r.send(s, uint64(k), size), "send %d", k)
	}
	r.settled(t, s, sends)
	r.allReceived(t, sends)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Equal(t, map[netio.Status]int{netio.OK: sends}, r.statuses)
	assert.Equal(t, int64(small), r.injects.Load(), "exactly the sends of at most inject_size bytes injected")
}

// hold stops the rig's poller until the returned release is called.
func (r *injectRig) hold() (release func()) {
	held, ch := make(chan struct{}), make(chan struct{})
	poll.Of(r.p).Go(func() { close(held); <-ch })
	<-held
	return func() { close(ch) }
}

// With the report queue full (the poller, held, reports nothing), sends
// take the regular post until the poller has reported.
func TestInjectFullReportQueue(t *testing.T) {
	r := newInjectRig(t)
	const bufs = 2
	s := r.dial(t, bufs, injectTestBuf)
	defer func() { assert.NoError(t, s.Close()) }()
	release := r.hold()
	const injected = sendcore.InjectQueueFactor * bufs
	for k := range injected + bufs {
		require.Equal(t, netio.OK, r.send(s, uint64(k), 64), "send %d", k)
	}
	assert.Equal(t, int64(injected), r.injects.Load(), "the report queue's worth injected")
	assert.Len(t, s.PendingSends(), bufs, "the rest posted with a completion")
	assert.Nil(t, s.GetBuffer())
	release()
	r.settled(t, s, injected+bufs)
	r.allReceived(t, injected+bufs)
}

// Small sends queued behind one the poller must post (HandOffSize) are
// injected by the poller's drain, after it, in order.
func TestInjectFromHandOffDrain(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, HandOffSize)
	defer func() { assert.NoError(t, s.Close()) }()
	release := r.hold()
	require.Equal(t, netio.OK, r.send(s, 0, HandOffSize))
	for k := uint64(1); k < 4; k++ {
		require.Equal(t, netio.OK, r.send(s, k, 64), "send %d", k)
	}
	assert.True(t, s.c.HandOffBusy(), "the small sends queue behind the large one")
	assert.Zero(t, r.injects.Load(), "nothing injected from the caller")
	release()
	r.settled(t, s, 4)
	r.allReceived(t, 4)
	assert.Equal(t, int64(3), r.injects.Load(), "the drain injected the small sends")
}

// A full transmit queue (-FI_EAGAIN) is NoResources, as for a regular
// send: the caller keeps the buffer, nothing is reported or counted, and
// the send succeeds once the provider takes it.
func TestInjectFullTransmitQueue(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	defer func() { assert.NoError(t, s.Close()) }()
	inject := s.c.InjectFunc()
	var refuse atomic.Bool
	refuse.Store(true)
	s.c.SetInjectFunc(func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
		if refuse.Load() {
			return fabric.EAGAIN
		}
		return inject(ep, key, n)
	})
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	assert.Equal(t, netio.NoResources, s.SendBuffer(buf, 64))
	assert.Equal(t, SendStats{}, s.Stats(), "nothing counted")
	assert.Equal(t, []uint64{}, append([]uint64{}, s.PendingSends()...), "nothing in flight")
	refuse.Store(false)
	r.mu.Lock()
	r.sizes[0] = 64
	r.inFlight[buf.ID()]++
	r.mu.Unlock()
	binary.LittleEndian.PutUint64(buf.Bytes(), 0)
	require.Equal(t, netio.OK, s.SendBuffer(buf, 64), "the caller still holds the buffer")
	r.settled(t, s, 1)
}

// When the peer dies or the endpoint closes while a goroutine sends, every
// send that returned OK is reported exactly once, and the end is reported
// once.
func TestInjectEveryKeyOnceAtTheEnd(t *testing.T) {
	for _, end := range []string{"peer", "close"} {
		t.Run(end, func(t *testing.T) {
			r := newInjectRig(t)
			s := r.dial(t, 16, injectTestBuf)
			var sent atomic.Int64
			done := make(chan struct{})
			go func() {
				defer close(done)
				for k := uint64(0); ; k++ {
					size := 64
					if k%5 == 4 {
						size = 512
					}
					if r.send(s, k, size) != netio.OK {
						return
					}
					sent.Add(1)
				}
			}()
			require.Eventually(t, func() bool { return sent.Load() > 500 }, 10*time.Second, time.Millisecond)
			if end == "peer" {
				require.NoError(t, r.l.Close()) // the receive endpoints close with it
			} else {
				require.NoError(t, s.Close())
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				require.FailNow(t, "the sender did not stop")
			}
			assert.NoError(t, s.Close())
			r.settled(t, s, int(sent.Load()))
			assert.Equal(t, int32(1), r.closed.Load(), "OnConnectionClosed once")
			assert.Positive(t, r.injects.Load())
			r.mu.Lock()
			defer r.mu.Unlock()
			for st := range r.statuses {
				assert.Contains(t, []netio.Status{netio.OK, netio.Failed, netio.Canceled}, st)
			}
		})
	}
}

// A provider that injects nothing (inject_size 0) keeps every send on the
// regular post; without SendConfig.Inject nothing is injected either.
func TestInjectOff(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	s.c.SetInjectSize(0)
	assert.Zero(t, s.InjectSize())
	for k := range 100 {
		require.Equal(t, netio.OK, r.send(s, uint64(k), 64))
	}
	r.settled(t, s, 100)
	assert.Zero(t, r.injects.Load(), "nothing injected")
	require.NoError(t, s.Close())

	plain, err := Dial(context.Background(), r.mgr, r.l.Addr(), SendConfig{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, plain.Close()) }()
	assert.Zero(t, plain.InjectSize())
	assert.Nil(t, plain.c.InjectFunc(), "Inject off: no inject post")
}

// Inject and DeliveryComplete exclude each other, InjectLinger is not
// negative, and Dial says so before it connects.
func TestInjectRefusesDeliveryComplete(t *testing.T) {
	r := newInjectRig(t)
	_, err := Dial(context.Background(), r.mgr, r.l.Addr(), SendConfig{Inject: true, DeliveryComplete: true})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = Dial(context.Background(), r.mgr, r.l.Addr(), SendConfig{Inject: true, InjectLinger: -time.Second})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "a negative InjectLinger")
}

// Injects whose reports still wait when the endpoint ends are reported OK
// by the teardown (the provider took them), once; none is lost because its
// buffer was claimed at once.
func TestInjectReportedAtTeardown(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	release := r.hold()
	// Queued before the sends' report, so the teardown runs first.
	poll.Of(r.p).Go(func() { s.c.Teardown(netio.ErrClosed) })
	r.injectAllOKThenClosed(t, s, release, 10)
	assert.NoError(t, s.Close())
}

// injectAllOKThenClosed injects sends 64 B messages while the poller is
// held, releases it, and checks that every key was reported once, OK,
// before the one OnConnectionClosed.
func (r *injectRig) injectAllOKThenClosed(t *testing.T, s *SendEndpointBuffered, release func(), sends int) {
	t.Helper()
	for k := range sends {
		require.Equal(t, netio.OK, r.send(s, uint64(k), 64), "send %d", k)
	}
	require.Equal(t, int64(sends), r.injects.Load())
	release()
	r.settled(t, s, sends)
	r.mu.Lock()
	assert.Equal(t, map[netio.Status]int{netio.OK: sends}, r.statuses)
	r.mu.Unlock()
	assert.Equal(t, int32(1), r.closed.Load())
}

// A callback that closes the endpoint while the poller reports a batch of
// injects: the rest of that batch, and what came after it, are reported
// once, OK, before OnConnectionClosed.
func TestInjectCloseFromACallback(t *testing.T) {
	r := newInjectRig(t)
	s := r.dial(t, 4, injectTestBuf)
	closeErr := make(chan error, 1)
	r.afterReport = func(n int) {
		if n == 2 {
			closeErr <- s.Close()
		}
	}
	release := r.hold()
	r.injectAllOKThenClosed(t, s, release, 21)
	assert.NoError(t, <-closeErr)
	assert.NoError(t, s.Close())
}
