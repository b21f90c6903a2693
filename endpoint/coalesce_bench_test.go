package endpoint_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/cputime"
)

// BenchmarkCoalesce measures small-message coalescing on tcp loopback, one
// 64-byte message per op, with the default 64 KiB buffers and flush
// interval. e2e runs from SendMessage to the receiver's OnMessage callback
// for every message (the target is 10 M msgs/s); send stops the clock once
// the last message is posted, and its receiver takes the buffers with
// OnData without decoding them. Both must report 0 allocs/op.
func BenchmarkCoalesce(b *testing.B) {
	b.Run("e2e/64B", func(b *testing.B) { benchCoalesce(b, 64, 64<<10, true) })
	b.Run("send/64B", func(b *testing.B) { benchCoalesce(b, 64, 64<<10, false) })
}

// BenchmarkCoalesceBufferSize is the end-to-end benchmark for buffers other
// than the default 64 KiB, to check that default.
func BenchmarkCoalesceBufferSize(b *testing.B) {
	for _, bufSize := range []int{8 << 10, 16 << 10, 32 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("%dKiB", bufSize>>10), func(b *testing.B) { benchCoalesce(b, 64, bufSize, true) })
	}
}

// benchCoalesce sends b.N messages of size bytes through buffers of bufSize
// bytes; with decode the clock runs until the receiver's OnMessage has seen
// them all.
func benchCoalesce(b *testing.B, size, bufSize int, decode bool) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	received := make(chan struct{})
	lcfg := endpoint.ListenConfig{Params: netio.ReceiveParams{BufferSize: bufSize, BufferCount: 64}}
	if decode {
		n := 0 // the poller goroutine's alone
		lcfg.OnMessage = func(*endpoint.ReceiveEndpoint, uint64, []byte, uint8) {
			if n++; n == b.N {
				close(received)
			}
		}
	} else {
		lcfg.OnData = func(*endpoint.ReceiveEndpoint, []byte) {}
	}
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", lcfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()

	freed := make(chan struct{}, 64)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: bufSize, BufferCount: 64},
		Coalesce:        &endpoint.CoalesceConfig{},
		OnSendCompleted: func(uint64, netio.Status) { signal(freed) },
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	msg := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		st := s.SendMessage(uint64(i>>4), msg) // a new tag every 16 messages
		for st == netio.NoResources {
			<-freed // a completion gave a buffer back
			st = s.SendMessage(uint64(i>>4), msg)
		}
		if st != netio.OK {
			b.Fatalf("SendMessage: %v", st)
		}
	}
	for st := s.Flush(); st != netio.OK; st = s.Flush() {
		if st != netio.NoResources {
			b.Fatalf("Flush: %v", st)
		}
		<-freed
	}
	if decode {
		select {
		case <-received:
		case <-time.After(30 * time.Second):
			b.Fatalf("not every message reached OnMessage: %+v", s.CoalesceStats())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	// CPU time of the whole process (sender, both pollers, the kernel's
	// share) per message: steadier than msgs/s on a shared machine.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/msg")
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
