package endpoint_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// BenchmarkReplyRoundTrip bounces a 64-byte message over one tcp loopback
// connection (DialReplies, ListenReplies), each side on a busy poller of
// its own, everything in callbacks as netio-perf's ping-pong: one op is a
// round trip. It must report 0 allocs/op: both directions' send, receive,
// completion and repost paths.
func BenchmarkReplyRoundTrip(b *testing.B) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	defer mgr.Close()
	busy := cq.Config{Mode: cq.BusyPoll}
	srvPoller, err := cq.Open(mgr, busy)
	if err != nil {
		b.Fatal(err)
	}
	defer srvPoller.Close()
	cliPoller, err := cq.Open(mgr, busy)
	if err != nil {
		b.Fatal(err)
	}
	defer cliPoller.Close()

	const size = 64
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params:  netio.ReceiveParams{BufferSize: 256, BufferCount: 8},
		Replies: &endpoint.ListenReplies{Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 8}},
		OnData: func(ep *endpoint.ReceiveEndpoint, data []byte) {
			if buf := ep.GetBuffer(); buf == nil || ep.SendBuffer(buf, len(data)) != netio.OK {
				b.Error("echo refused")
			}
		},
		Runtime: cq.Runtime{Poller: srvPoller}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()

	var left atomic.Int64 // round trips to go; set before the first ping of a round
	done := make(chan struct{}, 1)
	ping := func(s *endpoint.SendEndpointBuffered) {
		if buf := s.GetBuffer(); buf == nil || s.SendBuffer(buf, size) != netio.OK {
			b.Error("ping refused")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: 256, BufferCount: 8},
		Replies: &endpoint.DialReplies{Params: netio.ReceiveParams{BufferSize: 256, BufferCount: 8},
			OnReply: func(ep *endpoint.SendEndpointBuffered, _ []byte) {
				if left.Add(-1) > 0 {
					ping(ep)
					return
				}
				done <- struct{}{}
			}},
		Runtime: cq.Runtime{Poller: cliPoller}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()

	round := func(n int) {
		left.Store(int64(n))
		ping(s)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Fatal("round trips stalled")
		}
	}
	round(100) // warm up: connection, caches
	b.ReportAllocs()
	b.ResetTimer()
	round(b.N)
}
