package endpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// BenchmarkSendBuffered measures the buffered send path end to end on tcp
// loopback: GetBuffer, SendBuffer, completion, release, and the receiver's
// OnData and repost. It must report 0 allocs/op.
func BenchmarkSendBuffered(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchBuffered(b, size, 64, false) })
	}
}

// benchBuffered streams size-byte messages through a buffered send
// endpoint with bufs buffers. With fromApp each message is first copied
// from the application's memory into the buffer, as a readout program
// would; without, the buffer is sent as it is (the library's own cost).
func benchBuffered(b *testing.B, size, bufs int, fromApp bool) {
	mgr, l, received := benchReceiver(b, size)
	defer mgr.Close()
	defer l.Close()
	var src []byte
	if fromApp {
		src = make([]byte, size)
	}
	freed := make(chan struct{}, bufs)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: size, BufferCount: bufs},
		OnSendCompleted: func(uint64, netio.Status) { signal(freed) },
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
		copy(buf.Bytes(), src)
		if st := s.SendBuffer(buf, size); st != netio.OK {
			b.Fatalf("SendBuffer: %v", st)
		}
	}
	awaitReceived(b, received)
}
