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

// BenchmarkPull is the synchronous Pull: one transfer at a time, each
// waited for. It must report 0 allocs/op.
func BenchmarkPull(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchRMASync(b, size, false) })
	}
}

// BenchmarkPush is the synchronous Push; 0 allocs/op too.
func BenchmarkPush(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) { benchRMASync(b, size, true) })
	}
}

// rmaBench is an initiator's RMA endpoint to a target's listener, with a
// local registration and an exposed target region of slots × size bytes
// each.
type rmaBench struct {
	ep     *endpoint.RMAEndpoint
	local  *domain.Registration
	remote endpoint.RemoteRegion
}

// newRMABench sets up two tcp domains on loopback; everything is closed at
// the benchmark's cleanup.
func newRMABench(b *testing.B, size, slots int) *rmaBench {
	b.Helper()
	check := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	closeAtEnd := func(c interface{ Close() error }) { b.Cleanup(func() { _ = c.Close() }) }
	target, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	check(err)
	closeAtEnd(target)
	init, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	check(err)
	closeAtEnd(init)
	l, err := endpoint.Listen(target, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {}})
	check(err)
	closeAtEnd(l)
	remote, err := endpoint.AllocExposed(target, size*slots, domain.AccessRemoteRead|domain.AccessRemoteWrite)
	check(err)
	closeAtEnd(remote)
	local, err := init.AllocRegistered(size*slots, domain.AccessRead|domain.AccessWrite)
	check(err)
	closeAtEnd(local)
	ep, err := endpoint.DialRMA(context.Background(), init, l.Addr(), endpoint.RMAConfig{})
	check(err)
	closeAtEnd(ep) // cleanups run last-in first-out: the endpoint goes first
	return &rmaBench{ep: ep, local: local, remote: remote.Descriptor()}
}

// benchRMA moves size bytes per iteration between two domains, keeping
// rmaBenchDepth transfers in flight, each to its own slot of the local
// and remote regions.
func benchRMA(b *testing.B, size int, push bool) {
	r := newRMABench(b, size, rmaBenchDepth)
	start := r.ep.PullAsync
	if push {
		start = r.ep.PushAsync
	}
	ctx := context.Background()
	var ops [rmaBenchDepth]*endpoint.RMAOp
	wait := func(op *endpoint.RMAOp) {
		if n, err := op.Wait(ctx); err != nil || n != size {
			b.Fatalf("transfer: %d bytes, %v", n, err)
		}
	}
	var err error
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := i % rmaBenchDepth
		if ops[slot] != nil {
			wait(ops[slot])
		}
		off := slot * size
		if ops[slot], err = start(r.local, off, r.remote, uint64(off), size); err != nil {
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

// benchRMASync moves size bytes per iteration with the synchronous Pull or
// Push.
func benchRMASync(b *testing.B, size int, push bool) {
	r := newRMABench(b, size, 1)
	transfer := r.ep.Pull
	if push {
		transfer = r.ep.Push
	}
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if n, err := transfer(ctx, r.local, 0, r.remote, 0, size); err != nil || n != size {
			b.Fatalf("transfer: %d bytes, %v", n, err)
		}
	}
}
