package endpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// BenchmarkSendBuffered measures the buffered send path end to end on tcp
// loopback: GetBuffer, SendBuffer, completion, release, and the receiver's
// OnData and repost. It must report 0 allocs/op. The pooled variants lease
// the send buffers from a pool.Pool (SendConfig.Buffers) and must cost the
// same. The 1 MiB case goes through the poller's hand-off (HandOffSize).
func BenchmarkSendBuffered(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchBuffered(b, size, 64, false) })
		b.Run(fmt.Sprintf("pooled/%dKiB", size>>10), func(b *testing.B) { benchBufferedFrom(b, size, 64, false, true) })
	}
	b.Run("1024KiB", func(b *testing.B) { benchBuffered(b, 1<<20, 16, false) })
}

// benchBuffered streams size-byte messages through a buffered send
// endpoint with bufs buffers. With fromApp each message is first copied
// from the application's memory into the buffer, as a readout program
// would; without, the buffer is sent as it is (the library's own cost).
func benchBuffered(b *testing.B, size, bufs int, fromApp bool) {
	benchBufferedFrom(b, size, bufs, fromApp, false)
}

// benchBufferedFrom is benchBuffered, with the send buffers leased from a
// pool.Pool when pooled.
func benchBufferedFrom(b *testing.B, size, bufs int, fromApp, pooled bool) {
	mgr, l, received := benchReceiver(b, size)
	defer mgr.Close()
	defer l.Close()
	var src []byte
	if fromApp {
		src = make([]byte, size)
	}
	freed := make(chan struct{}, bufs)
	cfg := endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: size, BufferCount: bufs},
		OnSendCompleted: func(uint64, netio.Status) { signal(freed) },
	}
	if pooled {
		src := benchPool(b, mgr, size, bufs)
		cfg.Buffers = sendbuf.Pooled(src)
		defer src.Close() // after the endpoint's Close, deferred below
	}
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := s.GetBuffer()
		for buf == nil {
			<-freed // a completion gave a buffer back
			buf = s.GetBuffer()
		}
		copy(buf.Bytes(), src)
		if st := s.SendBuffer(buf, size); st != netio.OK {
			b.Fatalf("SendBuffer: %v", st)
		}
	}
	awaitReceived(b, received)
}

// benchPool is a pool.Pool of count send buffers of size bytes in mgr.
func benchPool(b *testing.B, mgr *domain.Manager, size, count int) *pool.Pool {
	p, err := pool.New(mgr, pool.Config{Size: size, Count: count})
	if err != nil {
		b.Fatal(err)
	}
	return p
}
