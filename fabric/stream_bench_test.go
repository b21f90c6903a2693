package fabric_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/cputime"
)

// BenchmarkRawStream is hack/cbaseline's bw mode in Go: the
// same program shape (one domain, a sending and a receiving side, each a
// goroutine with its own completion queue, spinning on fi_cq_read without
// wait objects, the sender keeping a window of sends outstanding and the
// receiver reposting each buffer as it completes), but written in Go on
// this package, with no netio code above it. What this loses to C is Go's
// (cgo calls and the runtime's own threads), not the library's. It is no
// ceiling for netio-go, whose pollers are shaped differently: at 64 KiB
// netio-go is faster than this.
//
// Both sides call runtime.Gosched every runtimeTick, which is the fastest
// way found to run this shape. A goroutine that never passes through the
// scheduler for 10 ms is preempted by the runtime's monitor thread, and
// from then on the monitor polls every 20 µs and takes the P of every cgo
// call it catches (a 1 MiB sendmsg takes over 100 µs), starting another
// thread to look for work each time: on two cores, thousands of wake-ups a
// second that preempt the spinning sides. Locked threads (as C has) are
// worse: their Gosched hands the thread over. With the tick the monitor
// backs off to 10 ms and P hand-offs stop (`perf stat` over 8,000 messages
// of 1 MiB on locked threads without it: 5,753 monitor sleeps, 2,256
// hand-offs, 16,930 context switches; with it 417, 29 and 1,958), worth
// about 4% at 1 MiB in five interleaved runs.
//
// Besides MB/s it reports cpu-s/GB: the process's CPU time (user and
// system, both sides) per 10^9 bytes moved, as cbaseline and netio-perf
// count it. hack/bench-compare runs it in every round ("raw Go", under its
// bandwidth table).
//
//	go test -run '^$' -bench RawStream -benchtime 2s ./fabric
func BenchmarkRawStream(b *testing.B) {
	for _, c := range []struct{ size, window int }{{64 << 10, 128}, {1 << 20, 16}} {
		b.Run(fmt.Sprintf("%dKiB", c.size>>10), func(b *testing.B) { rawStream(b, c.size, c.window) })
	}
}

func rawStream(b *testing.B, size, window int) {
	rxDepth := 2 * window
	// One domain, an event queue per side and completion queues without
	// wait objects, as in C (a CQ with one makes tcp signal it on every
	// completion).
	base := openStack(b, "tcp")
	recv, cli := sideOf(b, base), sideOf(b, base)
	srvCQ := recv.cq

	rbuf := mmap(b, rxDepth*size)
	rmr, err := recv.dom.RegisterMemory(addr(rbuf), len(rbuf), fabric.AccessRecv, 1)
	require.NoError(b, err)
	b.Cleanup(func() { _ = rmr.Close() })
	var sep *fabric.Endpoint
	cep := connectPair(b, recv, cli, func(ep *fabric.Endpoint) {
		sep = ep
		for i := range rxDepth {
			require.Zero(b, ep.Recv(addr(rbuf)+uintptr(i*size), size, rmr.Desc(), uint64(i)))
		}
	})
	sbuf := mmap(b, window*size)
	smr, err := cli.dom.RegisterMemory(addr(sbuf), len(sbuf), fabric.AccessSend, 2)
	require.NoError(b, err)
	b.Cleanup(func() { _ = smr.Close() })

	var received atomic.Int64
	var stop atomic.Bool
	done := make(chan fabric.Errno, 1)
	go func() { done <- drainReceives(srvCQ, sep, rbuf, size, rmr.Desc(), &received, &stop) }()

	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	errno := sendWindow(cli.cq, cep, sbuf, size, window, smr.Desc(), b.N)
	if errno == 0 {
		errno = awaitReceived(&received, int64(b.N), done)
	}
	b.StopTimer()
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()/(float64(b.N)*float64(size)/1e9), "cpu-s/GB")
	stop.Store(true)
	require.Zero(b, errno)
	require.Zero(b, <-done)
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	d, err := cputime.Process()
	require.NoError(b, err)
	return d
}

// awaitReceived waits until n messages were received, or the receiving
// side ended (and then puts its result back for the caller).
func awaitReceived(received *atomic.Int64, n int64, done chan fabric.Errno) fabric.Errno {
	for received.Load() < n {
		select {
		case errno := <-done:
			done <- errno
			if errno == 0 {
				return fabric.ECANCELED // stopped before all arrived
			}
			return errno
		default:
			runtime.Gosched()
		}
	}
	return 0
}

// runtimeTick is how often the raw stream's sides pass through the
// scheduler (see BenchmarkRawStream).
const runtimeTick = 100 * time.Microsecond

// ticker calls runtime.Gosched once per runtimeTick of its polls.
type ticker struct{ last time.Time }

func (t *ticker) poll() {
	if now := time.Now(); now.Sub(t.last) >= runtimeTick {
		runtime.Gosched()
		t.last = now
	}
}

// sendWindow sends n messages of size bytes from slots of buf, keeping up
// to window outstanding; it returns when all completed.
func sendWindow(cq *fabric.CQ, ep *fabric.Endpoint, buf []byte, size, window int, desc uintptr, n int) fabric.Errno {
	var tick ticker
	free := make([]uint64, 0, window)
	for i := range window {
		free = append(free, uint64(i))
	}
	for sent, completed := 0, 0; completed < n; {
		for sent < n && len(free) > 0 {
			slot := free[len(free)-1]
			errno := ep.Send(addr(buf)+uintptr(int(slot)*size), size, desc, slot)
			if errno == fabric.EAGAIN {
				break
			}
			if errno != 0 {
				return errno
			}
			free, sent = free[:len(free)-1], sent+1
		}
		tick.poll()
		got, errno := readBatch(cq)
		if errno != 0 {
			return errno
		}
		for i := range got {
			free = append(free, cq.Entry(i).Context)
		}
		completed += got
	}
	return 0
}

// drainReceives reposts every completed receive, counting them, until stop.
func drainReceives(cq *fabric.CQ, ep *fabric.Endpoint, buf []byte, size int, desc uintptr, received *atomic.Int64, stop *atomic.Bool) fabric.Errno {
	var tick ticker
	for !stop.Load() {
		tick.poll()
		got, errno := readBatch(cq)
		if errno != 0 {
			return errno
		}
		for i := range got {
			slot := cq.Entry(i).Context
			if errno := ep.Recv(addr(buf)+uintptr(int(slot)*size), size, desc, slot); errno != 0 {
				return errno
			}
		}
		received.Add(int64(got))
	}
	return 0
}

// sideOf returns a stack on base's domain with an event queue and a
// completion queue of its own, the CQ without a wait object; both are
// closed at the end of the benchmark.
func sideOf(b *testing.B, base *stack) *stack {
	eq, err := base.fab.OpenEQ(64, true)
	require.NoError(b, err)
	cq, err := base.dom.OpenCQ(1024, false)
	require.NoError(b, err)
	b.Cleanup(func() {
		assert.NoError(b, cq.Close())
		assert.NoError(b, eq.Close())
	})
	return &stack{info: base.info, fab: base.fab, dom: base.dom, eq: eq, cq: cq}
}

// readBatch reads completions; an error completion is EAVAIL (the stream
// is broken).
func readBatch(cq *fabric.CQ) (int, fabric.Errno) {
	got, avail, errno := cq.Read()
	if avail {
		return 0, fabric.EAVAIL
	}
	return got, errno
}
