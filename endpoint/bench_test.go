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

// BenchmarkSendBuffered measures the buffered send path end to end on tcp
// loopback: GetBuffer, SendBuffer, completion, release, and the receiver's
// OnData and repost. It must report 0 allocs/op.
func BenchmarkSendBuffered(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchSend(b, "tcp", size) })
	}
}

func benchSend(b *testing.B, prov string, size int) {
	mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	var received atomic.Int64
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: size, BufferCount: 64},
		OnData: func(*endpoint.ReceiveEndpoint, []byte) { received.Add(1) },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	freed := make(chan struct{}, 64)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: size, BufferCount: 64},
		OnSendCompleted: func(uint64, netio.Status) {
			select {
			case freed <- struct{}{}:
			default:
			}
		},
	})
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
		if st := s.SendBuffer(buf, size); st != netio.OK {
			b.Fatalf("SendBuffer: %v", st)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for received.Load() < int64(b.N) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	if got := received.Load(); got != int64(b.N) {
		b.Fatalf("received %d of %d messages", got, b.N)
	}
}
