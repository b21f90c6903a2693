package pubsub_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// BenchmarkSubscriberReceive64 is a subscriber's whole receive path per
// 64-byte message over tcp on 127.0.0.1: the kernel's copy out of the
// socket, the provider, the poller, the decoding and numbering, an
// OnMessage that counts, the repost, and the poller's waiting between
// buffers. A publisher in the same process (Shared mode) publishes b.N
// messages on one tag to one subscriber; sub-cpu-ns/msg is the CPU time of
// the subscriber's poller thread per message delivered, read from
// /proc/self/task/TID/schedstat, which the publisher's threads do not
// share and a busy machine changes less than the rate. The poller is
// locked to its thread (LockOSThread, as a subscriber's own poller is by
// default when GOMAXPROCS > 1), so that the thread is the poller's alone.
func BenchmarkSubscriberReceive64(b *testing.B) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1}, Mode: pubsub.Shared,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 8}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var rc recvCounter
	s, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()),
		OnMessage: rc.onMessage, OnBuffer: rc.onBuffer,
		Runtime: cq.Runtime{PollerConfig: cq.Config{LockOSThread: true}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Subscribe(ctx, 1); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64)
	publish := func(n int) {
		for range n {
			for st := p.Publish(1, buf); st != pubsub.OK; st = p.Publish(1, buf) {
				if st != pubsub.NoResources {
					b.Fatalf("Publish: %v", st)
				}
				runtime.Gosched()
			}
		}
	}
	publish(100000) // warm up: buffers taken and posted, the poller's thread known
	rc.waitFor(b, 100000)
	tid := rc.tid.Load()
	cpu0 := threadCPU(tid)
	b.SetBytes(64)
	b.ReportAllocs()
	b.ResetTimer()
	publish(b.N)
	rc.waitFor(b, 100000+int64(b.N))
	b.StopTimer()
	if cpu1 := threadCPU(tid); cpu0 >= 0 && cpu1 >= 0 && rc.tid.Load() == tid && !rc.moved.Load() {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "sub-cpu-ns/msg")
	}
}

// recvCounter counts what a subscriber received: got on the poller
// goroutine, published to seen once per buffer (as netio-perf subscribe
// does), and the thread the callbacks run on.
type recvCounter struct {
	got   int64 // poller goroutine only
	seen  atomic.Int64
	tid   atomic.Int64
	moved atomic.Bool // the callbacks ran on more than one thread
}

func (c *recvCounter) onMessage(pubsub.Message) { c.got++ }

func (c *recvCounter) onBuffer(string, []byte) {
	c.seen.Store(c.got)
	tid := int64(unix.Gettid())
	if old := c.tid.Swap(tid); old != 0 && old != tid {
		c.moved.Store(true)
	}
}

// waitFor waits until n messages were received, for 30 s at most.
func (c *recvCounter) waitFor(b *testing.B, n int64) {
	for deadline := time.Now().Add(30 * time.Second); c.seen.Load() < n; time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			b.Fatalf("received %d of %d", c.seen.Load(), n)
		}
	}
}

// threadCPU returns the CPU time in ns that thread tid of this process has
// run, from its schedstat, or -1 when it cannot be read.
func threadCPU(tid int64) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return -1
	}
	f, _, _ := bytes.Cut(raw, []byte(" "))
	ns, err := strconv.ParseInt(string(f), 10, 64)
	if err != nil {
		return -1
	}
	return ns
}
