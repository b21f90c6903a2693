package endpoint_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// rmaBenchDepth is how many transfers the RMA benchmarks keep in flight,
// as the buffered benchmark keeps its send buffers in flight.
const rmaBenchDepth = 8

// BenchmarkRMAVsBuffered compares, in one run on tcp loopback, pulling and
// pushing size bytes with RMA against sending them as buffered messages.
// The target for 1 MiB: pull and push at least 80% of buffered's
// throughput in the same run.
func BenchmarkRMAVsBuffered(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("pull/"+name, func(b *testing.B) { benchRMA(b, size, false) })
		b.Run("push/"+name, func(b *testing.B) { benchRMA(b, size, true) })
		b.Run("buffered/"+name, func(b *testing.B) { benchBuffered(b, size, 64, false) })
	}
}

// benchRMA moves size bytes per iteration between two domains, keeping
// rmaBenchDepth transfers in flight, each to its own slot of the local
// and remote regions.
func benchRMA(b *testing.B, size int, push bool) {
	target, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	init, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer init.Close()
	l, err := endpoint.Listen(target, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	remote, err := endpoint.AllocExposed(target, size*rmaBenchDepth, domain.AccessRemoteRead|domain.AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer remote.Close()
	local, err := init.AllocRegistered(size*rmaBenchDepth, domain.AccessRead|domain.AccessWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	ep, err := endpoint.DialRMA(context.Background(), init, l.Addr(), endpoint.RMAConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer ep.Close()

	start := ep.PullAsync
	if push {
		start = ep.PushAsync
	}
	ctx := context.Background()
	var ops [rmaBenchDepth]*endpoint.RMAOp
	wait := func(op *endpoint.RMAOp) {
		if n, err := op.Wait(ctx); err != nil || n != size {
			b.Fatalf("transfer: %d bytes, %v", n, err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := i % rmaBenchDepth
		if ops[slot] != nil {
			wait(ops[slot])
		}
		off := slot * size
		if ops[slot], err = start(local, off, remote.Descriptor(), uint64(off), size); err != nil {
			b.Fatal(err)
		}
	}
	for _, op := range ops {
		if op != nil {
			wait(op)
		}
	}
	b.StopTimer()
}
