package rdm_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// BenchmarkInjectPaced injects one 64-byte message every 200 µs, the quiet
// rate at which each inject is alone in the queue (tracked: fi_send with a
// completion), and reports the process's CPU time per message (user+sys,
// getrusage: both endpoints and their poller), which load changes less
// than wall time. The file runs unchanged on branches before the inject
// confirmation, for an A/B of the cost.
func BenchmarkInjectPaced(b *testing.B) {
	for _, provider := range []string{"tcp;ofi_rxm", "sockets"} {
		b.Run(provider, func(b *testing.B) {
			tx, peer, done := benchPair(b, provider, 64, rdm.Config{})
			defer done()
			data := make([]byte, 64)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			start := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				for deadline := time.Now().Add(time.Second); tx.Inject(data, peer) != netio.OK; {
					if time.Now().After(deadline) {
						b.Fatal("inject refused for 1 s")
					}
					time.Sleep(50 * time.Microsecond)
				}
				time.Sleep(200 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/msg")
		})
	}
}

// cpuTime returns the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
