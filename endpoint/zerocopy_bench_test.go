package endpoint_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// BenchmarkZeroCopyVsBuffered compares, in one run on tcp loopback, the
// buffered path (copy into a registered buffer) with zero-copy sends from a
// declared region and from Go memory through the registration cache.
func BenchmarkZeroCopyVsBuffered(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("buffered/"+name, func(b *testing.B) { benchBuffered(b, size, 16, true) })
		b.Run("zerocopy-region/"+name, func(b *testing.B) { benchZeroCopy(b, size, true) })
		b.Run("zerocopy-go/"+name, func(b *testing.B) { benchZeroCopy(b, size, false) })
	}
}

func benchZeroCopy(b *testing.B, size int, region bool) {
	mgr, l, received := benchReceiver(b, size)
	defer mgr.Close()
	defer l.Close()
	const window = 16
	mem := make([]byte, size*window)
	freed := make(chan struct{}, window)
	cfg := endpoint.ZeroCopyConfig{HeaderCount: window, OnSendCompleted: func(uint64, netio.Status) { signal(freed) }}
	if region {
		cfg.Region = mem
	}
	z, err := endpoint.DialZeroCopy(context.Background(), mgr, l.Addr(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer z.Close()
	var hdr [16]byte
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data := mem[(i%window)*size : (i%window+1)*size]
		for {
			st := z.Send(hdr[:], data, uint64(i))
			if st == netio.OK {
				break
			}
			if st != netio.NoResources {
				b.Fatal(st)
			}
			<-freed
		}
	}
	awaitReceived(b, received)
}

func benchReceiver(b *testing.B, size int) (*domain.Manager, *endpoint.Listener, *atomic.Int64) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	received := new(atomic.Int64)
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: size + 64, BufferCount: 32},
		OnData: func(*endpoint.ReceiveEndpoint, []byte) { received.Add(1) },
	})
	if err != nil {
		b.Fatal(err)
	}
	return mgr, l, received
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func awaitReceived(b *testing.B, received *atomic.Int64) {
	deadline := time.Now().Add(30 * time.Second)
	for received.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	if got := received.Load(); got != int64(b.N) {
		b.Fatalf("received %d of %d", got, b.N)
	}
}
