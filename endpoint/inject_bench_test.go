package endpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// BenchmarkSendBufferedSmall streams 64 B messages, window 64, on tcp
// loopback through a buffered send endpoint: regular sends with a
// provider completion each, and with SendConfig.Inject (fi_inject, keys
// reported by the core). Both must report 0 allocs/op. hack/inject-ab.sh
// measures the same two against the C baseline in two processes.
func BenchmarkSendBufferedSmall(b *testing.B) {
	b.Run("regular", func(b *testing.B) { benchSmall(b, false) })
	b.Run("inject", func(b *testing.B) { benchSmall(b, true) })
}

func benchSmall(b *testing.B, inject bool) {
	const size, bufs = 64, 64
	mgr, l, received := benchReceiver(b, size)
	defer mgr.Close()
	defer l.Close()
	freed := make(chan struct{}, 1)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: size, BufferCount: bufs},
		OnSendCompleted: func(uint64, netio.Status) { signal(freed) },
		Inject:          inject,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if inject && s.InjectSize() < size {
		b.Fatalf("inject size %d", s.InjectSize())
	}
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	// wait sleeps until a completion or 50 µs: a full transmit queue
	// (NoResources) empties without one when sends are injected.
	wait := func() {
		t.Reset(50 * time.Microsecond)
		select {
		case <-freed:
		case <-t.C:
		}
	}

	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf := s.GetBuffer()
		for buf == nil {
			wait()
			buf = s.GetBuffer()
		}
		st := s.SendBuffer(buf, size)
		for st == netio.NoResources {
			wait()
			st = s.SendBuffer(buf, size)
		}
		if st != netio.OK {
			b.Fatalf("SendBuffer: %v", st)
		}
	}
	awaitReceived(b, received)
}
