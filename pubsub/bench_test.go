package pubsub_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// benchPubSub publishes b.N messages of size bytes on one tag to subs
// subscribers (each its own poller) in the same process, and reports the
// rate delivered to each subscriber. NoResources (Block) is retried after
// a yield; the message is counted once taken.
func benchPubSub(b *testing.B, prov string, subs, size int, mode pubsub.Mode) {
	mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	cfg := pubsub.PublisherConfig{Tags: []uint64{1}, Mode: mode,
		Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 64}, MaxInFlight: 256}
	var zcBuf []byte
	if mode == pubsub.ZeroCopy {
		reg, err := mgr.AllocRegistered(size, domain.AccessSend)
		if err != nil {
			b.Fatal(err)
		}
		defer reg.Close()
		cfg.ZeroCopyRegion, zcBuf = reg, reg.Bytes()
	}
	p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	var got atomic.Int64
	var ss []*pubsub.Subscriber
	for range subs {
		s, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()),
			Receive:   netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 64},
			OnMessage: func(pubsub.Message) { got.Add(1) }})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.Subscribe(ctx, 1)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		ss = append(ss, s)
	}
	buf := make([]byte, size)
	publish := func() {
		for {
			switch st := p.Publish(1, buf); st {
			case pubsub.OK:
				return
			case pubsub.NoResources:
				runtime.Gosched()
			default:
				b.Fatalf("Publish: %v", st)
			}
		}
	}
	if mode == pubsub.ZeroCopy { // from one registered buffer, which never changes
		publish = func() {
			for {
				switch st := p.PublishZeroCopy(1, 0, zcBuf, 1); st {
				case pubsub.OK:
					return
				case pubsub.NoResources:
					runtime.Gosched()
				default:
					b.Fatalf("PublishZeroCopy: %v", st)
				}
			}
		}
	}
	for range 1000 { // warm up: buffers taken, maps grown
		publish()
	}
	want := int64(1000 * subs)
	for got.Load() < want {
		time.Sleep(time.Millisecond)
	}
	got.Store(0)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		publish()
	}
	want = int64(b.N * subs)
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	el := time.Since(start)
	b.StopTimer()
	if got.Load() != want {
		b.Fatalf("delivered %d of %d", got.Load(), want)
	}
	b.ReportMetric(float64(b.N)/el.Seconds()/1e6, "Mmsg/s/sub")
	b.ReportMetric(float64(want)/el.Seconds()/1e6, "Mmsg/s-total")
}

func BenchmarkPublish(b *testing.B) {
	for _, subs := range []int{1, 4} {
		for _, size := range []int{64, 1024, 4096} {
			b.Run(fmt.Sprintf("tcp/subs=%d/size=%d", subs, size), func(b *testing.B) {
				benchPubSub(b, "tcp", subs, size, pubsub.Buffered)
			})
			b.Run(fmt.Sprintf("tcp/subs=%d/size=%d/shared", subs, size), func(b *testing.B) {
				benchPubSub(b, "tcp", subs, size, pubsub.Shared)
			})
		}
	}
	b.Run("tcp/subs=1/size=64/immediate", func(b *testing.B) { benchPubSub(b, "tcp", 1, 64, pubsub.Immediate) })
	for _, size := range []int{4096, 32 << 10} {
		b.Run(fmt.Sprintf("tcp/subs=1/size=%d/zerocopy", size), func(b *testing.B) { benchPubSub(b, "tcp", 1, size, pubsub.ZeroCopy) })
		b.Run(fmt.Sprintf("tcp/subs=1/size=%d/buffered", size), func(b *testing.B) { benchPubSub(b, "tcp", 1, size, pubsub.Buffered) })
	}
}

// BenchmarkPublishNoSubscriptions is the cost of Publish itself: the tag
// lookup, its lock and sequence number.
func BenchmarkPublishNoSubscriptions(b *testing.B) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	buf := make([]byte, 64)
	b.SetBytes(64)
	b.ReportAllocs()
	for range b.N {
		if p.Publish(1, buf) != pubsub.NoSubscriptions {
			b.Fatal("status")
		}
	}
}
