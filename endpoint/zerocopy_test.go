package endpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// zcHeader is the test's message header: sequence number, offset of the
// data in the sender's memory, and its length.
func zcHeader(buf []byte, k, off, n int) []byte {
	binary.LittleEndian.PutUint64(buf[0:], uint64(k))
	binary.LittleEndian.PutUint32(buf[8:], uint32(off))
	binary.LittleEndian.PutUint32(buf[12:], uint32(n))
	return buf[:16]
}

// zcChecker counts messages whose header or data do not match: data byte i
// must be (seed + i) % 251, with seed from the header.
type zcChecker struct {
	next, bad atomic.Int64
	seedOf    func(k, off int) int
}

func (c *zcChecker) onData(_ *endpoint.ReceiveEndpoint, msg []byte) {
	k := int(c.next.Add(1) - 1)
	if len(msg) < 16 || int(binary.LittleEndian.Uint64(msg)) != k {
		c.bad.Add(1)
		return
	}
	off, n := int(binary.LittleEndian.Uint32(msg[8:])), int(binary.LittleEndian.Uint32(msg[12:]))
	data := msg[16:]
	if len(data) != n {
		c.bad.Add(1)
		return
	}
	if !bytes.Equal(data, patternOf(c.seedOf(k, off), n)) {
		c.bad.Add(1)
	}
}

func dialZeroCopy(t *testing.T, mgr *domain.Manager, addr string, cfg endpoint.ZeroCopyConfig) *endpoint.SendEndpointZeroCopy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	z, err := endpoint.DialZeroCopy(ctx, mgr, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, z.Close()) })
	return z
}

// 100000 messages whose data lies anywhere in a declared region (one
// registration for the connection), content checked on the receiver.
func TestZeroCopyStreamFromRegion(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			t.Parallel() // the providers' streams share nothing
			before, after := streamRegion(t, prov, 100_000, 1<<20, 4096, 64, mixedSize)
			assert.Equal(t, before, after, "region sends register nothing")
		})
	}
}

// streamRegion sends total messages through a zero-copy endpoint with
// headers header slots: message k carries sizeOf(k) bytes (at most
// maxSize) of a declared region of region bytes, from an offset that
// varies. The receiver checks that each arrives whole and in order. It
// returns the domain's registrations before and after the stream.
func streamRegion(t *testing.T, prov string, total, region, maxSize, headers int, sizeOf func(int) int) (before, after int) {
	mgr := openDomain(t, prov)
	mem, err := domain.Alloc(region) // outside the Go heap, like a DMA buffer
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, domain.Free(mem)) })
	for i := range mem {
		mem[i] = byte(i % 251)
	}
	chk := &zcChecker{seedOf: func(_, off int) int { return off }}
	l := listen(t, mgr, endpoint.ListenConfig{Params: netio.ReceiveParams{BufferSize: maxSize + 16, BufferCount: 2 * headers}, OnData: chk.onData})
	freed := make(chan struct{}, headers)
	var done atomic.Int64
	z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{
		Region:      mem,
		HeaderCount: headers,
		OnSendCompleted: func(uint64, netio.Status) {
			done.Add(1)
			signal(freed)
		},
	})
	before = mgr.Stats().Registrations
	var hdr [16]byte
	for k := 0; k < total; {
		n := sizeOf(k)
		off := (k * 4093) % (region - maxSize)
		switch st := z.Send(zcHeader(hdr[:], k, off, n), mem[off:off+n], uint64(k)); st {
		case netio.OK:
			k++
		case netio.NoResources:
			<-freed
		default:
			require.Failf(t, "send", "message %d: %v", k, st)
		}
	}
	waitFor(t, 60*time.Second, func() bool { return chk.next.Load() == int64(total) }, "all messages")
	waitFor(t, 10*time.Second, func() bool { return done.Load() == int64(total) }, "all completions")
	assert.Zero(t, chk.bad.Load(), "messages out of order, or with a wrong header or content")
	assert.Empty(t, z.PendingSends())
	assert.Equal(t, uint64(total), z.Stats().Completed)
	return before, mgr.Stats().Registrations
}

// 100000 messages from ordinary Go slices, pinned and registered through
// the cache, reused only after their completion.
func TestZeroCopyStreamFromGoSlices(t *testing.T) {
	const total, window, size = 100_000, 32, 4096
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			t.Parallel() // the providers' streams share nothing
			mgr := openDomain(t, prov)
			chk := &zcChecker{seedOf: func(k, _ int) int { return k }}
			l := listen(t, mgr, endpoint.ListenConfig{Params: netio.ReceiveParams{BufferSize: size + 16, BufferCount: 64}, OnData: chk.onData})
			free := make(chan int, window) // indexes of slices not in flight
			slices := make([][]byte, window)
			for i := range slices {
				slices[i] = make([]byte, size)
				free <- i
			}
			z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{
				HeaderCount:     window,
				OnSendCompleted: func(key uint64, _ netio.Status) { free <- int(key) },
			})
			var hdr [16]byte
			for k := range total {
				i := <-free
				n := mixedSize(k)
				data := slices[i][:n]
				copy(data, patternOf(k, n))
				require.Equal(t, netio.OK, z.Send(zcHeader(hdr[:], k, 0, n), data, uint64(i)), "message %d", k)
			}
			waitFor(t, 60*time.Second, func() bool { return chk.next.Load() == total }, "all messages")
			assert.Zero(t, chk.bad.Load(), "messages with a wrong header or content")
			waitFor(t, 10*time.Second, func() bool { return len(free) == window }, "all completions")
		})
	}
}

// With every header slot in flight behind a stalled receiver, Send reports
// NoResources; after completions it works again. Closing reports what is
// still pending as Canceled. tcp only: sockets completes sends it buffers.
func TestZeroCopyHeaderSlotsExhausted(t *testing.T) {
	mgr := openDomain(t, "tcp")
	release := make(chan struct{})
	var stalled atomic.Bool
	rcv := newReceiver()
	rcv.onData = func(*endpoint.ReceiveEndpoint, []byte) {
		if stalled.CompareAndSwap(false, true) {
			<-release
		}
	}
	const size = 8 << 20 // far more than the kernel buffers between the two sockets
	l := listen(t, mgr, rcv.config(netio.ReceiveParams{BufferSize: size + 1, BufferCount: 2}))
	statuses := make(chan netio.Status, 32)
	z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{
		HeaderSize: 16, HeaderCount: 4,
		OnSendCompleted: func(_ uint64, st netio.Status) { statuses <- st },
	})
	data := make([]byte, size)
	sent, st := 0, netio.OK
	for ; sent < 12; sent++ { // a send that reached the kernel completes and frees its slot
		if st = z.Send([]byte("h"), data, uint64(sent)); st != netio.OK {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, netio.NoResources, st, "all header slots in flight behind the stalled receiver")
	assert.Len(t, z.PendingSends(), 4)
	assert.Zero(t, z.FreeHeaders())
	assert.Zero(t, z.NumAvailableHeaders())
	close(release)
	assert.Equal(t, netio.OK, <-statuses)
	require.Eventually(t, func() bool { return z.FreeHeaders() > 0 }, 5*time.Second, time.Millisecond, "a completed send's slot free again")
	require.Eventually(t, func() bool { return z.Send([]byte("h"), data[:10], 99) == netio.OK }, 5*time.Second, time.Millisecond, "recovery")
	sent++
	waitFor(t, 20*time.Second, func() bool { return rcv.count.Load() == int64(sent) }, "every message")
}

func TestZeroCopyOversizeHeader(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{HeaderSize: 16, HeaderCount: 2})
	assert.Equal(t, netio.InvalidArgument, z.Send(make([]byte, 17), []byte("data"), 1), "header larger than a slot")
	assert.Empty(t, z.PendingSends(), "nothing taken")
	assert.Equal(t, 2, z.NumAvailableHeaders())
	assert.Equal(t, 2, z.FreeHeaders())
}

func TestZeroCopyPiecesAndEmptyMessages(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			l := listen(t, mgr, rcv.config(netio.ReceiveParams{}))
			z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{})
			require.GreaterOrEqual(t, z.MaxPieces(), 2)
			assert.Equal(t, netio.OK, z.SendV([]byte("H:"), [][]byte{[]byte("one,"), nil, []byte("two")}, 1))
			assert.Equal(t, netio.OK, z.Send(nil, nil, 2), "an empty message")
			assert.Equal(t, netio.OK, z.Send([]byte("only a header"), nil, 3))
			assert.Equal(t, netio.InvalidArgument, z.SendV(nil, make([][]byte, z.MaxPieces()+1), 4))
			waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 3 }, "three messages")
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			assert.Equal(t, []string{"H:one,two", "", "only a header"},
				[]string{string(rcv.messages[0]), string(rcv.messages[1]), string(rcv.messages[2])})
		})
	}
}

func TestZeroCopySendAfterClose(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	z, err := endpoint.DialZeroCopy(context.Background(), mgr, l.Addr(), endpoint.ZeroCopyConfig{})
	require.NoError(t, err)
	require.NoError(t, z.Close())
	assert.Equal(t, netio.Closed, z.Send([]byte("h"), []byte("data"), 1))
	assert.NoError(t, z.Close())
}

// An endpoint whose peer went away and that is then dropped without Close
// holds nothing: teardown released its registrations, the Region's pin and
// its poller, so a GC finds no leaked pin (the runtime would abort) and the
// domain can close.
func TestZeroCopyDroppedAfterPeerClose(t *testing.T) {
	mgr := openDomain(t, "tcp")
	rcv := newReceiver()
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", rcv.config(netio.ReceiveParams{}))
	require.NoError(t, err)
	closed := make(chan error, 1)
	func() {
		z, err := endpoint.DialZeroCopy(context.Background(), mgr, l.Addr(), endpoint.ZeroCopyConfig{
			Region:             make([]byte, 1<<16),
			OnConnectionClosed: func(err error) { closed <- err },
		})
		require.NoError(t, err)
		require.Equal(t, netio.OK, z.Send([]byte("h"), make([]byte, 100), 1))
		waitFor(t, 5*time.Second, func() bool { return rcv.count.Load() == 1 }, "the message")
	}() // z is dropped here, never closed
	require.NoError(t, l.Close())
	assert.ErrorIs(t, recvErr(t, closed, 5*time.Second, "connection-closed"), netio.ErrConnectionClosed)
	for range 3 {
		runtime.GC()
	}
	waitFor(t, 5*time.Second, func() bool { return mgr.Stats().Registrations == 0 }, "registrations freed by teardown")
}

// Concurrent senders: every byte is counted once, and Completed never
// passes Sent.
func TestZeroCopyConcurrentSendersCountExactly(t *testing.T) {
	mgr := openDomain(t, "tcp")
	l := listen(t, mgr, endpoint.ListenConfig{Params: netio.ReceiveParams{BufferSize: 256, BufferCount: 64}, OnData: func(*endpoint.ReceiveEndpoint, []byte) {}})
	z := dialZeroCopy(t, mgr, l.Addr(), endpoint.ZeroCopyConfig{HeaderCount: 2})
	const senders, each = 4, 500
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			data := make([]byte, 100+g)
			for i := 0; i < each; {
				if st := z.Send(nil, data, uint64(i)); st == netio.OK {
					i++
				} else if st != netio.NoResources {
					t.Errorf("send: %v", st)
					return
				}
				if s := z.Stats(); s.Completed+s.Failed > s.Sent {
					t.Errorf("completed %d > sent %d", s.Completed, s.Sent)
					return
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, 10*time.Second, func() bool { return z.Stats().Completed == senders*each }, "all completions")
	assert.Equal(t, uint64(each*(100+101+102+103)), z.Stats().Bytes)
}

func TestZeroCopyRejectsForeignDomain(t *testing.T) {
	mgr, other := openDomain(t, "tcp"), openDomain(t, "tcp")
	l := listen(t, mgr, newReceiver().config(netio.ReceiveParams{}))
	shared, err := other.AllocRegistered(4096, domain.AccessSend)
	require.NoError(t, err)
	defer func() { assert.NoError(t, shared.Close()) }()
	cache, err := other.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, cache.Close()) }()
	_, err = endpoint.DialZeroCopy(context.Background(), mgr, l.Addr(), endpoint.ZeroCopyConfig{SharedRegion: shared})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = endpoint.DialZeroCopy(context.Background(), mgr, l.Addr(), endpoint.ZeroCopyConfig{Cache: cache})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}
