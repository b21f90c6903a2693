package rdm_test

import (
	"slices"
	"testing"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

// BenchmarkPingPong bounces one 64-byte message between two endpoints in
// two domains of this process, a poller each, as netio-perf's rdm sweep
// does: each side's OnData sends the next message with GetBuffer and
// SendBuffer on its poller goroutine. An op is a round trip; ns/hop is
// half of it, the one-way latency hack/rdm-ratios.sh compares with
// cbaseline pingpong --endpoint rdm. Steady state allocates nothing.
//
// The figure is only meaningful when each poller has a core: on a loaded
// two-core machine the two pollers share one and a hop costs microseconds.
func BenchmarkPingPong(b *testing.B) {
	polls := []struct {
		name string
		cfg  cq.Config
	}{
		{"adaptive", cq.Config{}},
		{"busy-locked", cq.Config{Mode: cq.BusyPoll, LockOSThread: true}},
	}
	for _, provider := range []string{"shm", "tcp;ofi_rxm"} {
		for _, pc := range polls {
			b.Run(provider+"/"+pc.name, func(b *testing.B) { benchPingPong(b, provider, pc.cfg) })
		}
	}
}

// pinger is one side of the ping-pong; its OnData answers every message
// but the empty one that connected the pair, until it has received limit
// (the client) and then signals done.
type pinger struct {
	ep       *rdm.Endpoint
	to       rdm.Peer
	size     int
	received int
	limit    int // 0: answer every message (the server)
	done     chan struct{}
	failed   chan netio.Status
}

func (p *pinger) onData(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
	if len(data) == 0 {
		return
	}
	p.received++
	if p.limit > 0 && p.received >= p.limit {
		close(p.done)
		return
	}
	p.send()
}

func (p *pinger) send() {
	buf := p.ep.GetBuffer()
	if buf == nil {
		p.fail(netio.NoResources)
		return
	}
	if st := p.ep.SendBuffer(buf, p.size, p.to); st != netio.OK {
		p.ep.ReleaseBuffer(buf.ID())
		p.fail(st)
	}
}

func (p *pinger) fail(st netio.Status) {
	select {
	case p.failed <- st:
	default:
	}
}

func benchPingPong(b *testing.B, provider string, pc cq.Config) {
	const size = 64
	failed := make(chan netio.Status, 1)
	client := &pinger{size: size, limit: b.N, done: make(chan struct{}), failed: failed}
	server := &pinger{size: size, failed: failed}
	client.ep = pingPongSide(b, provider, pc, client.onData)
	server.ep = pingPongSide(b, provider, pc, server.onData)
	client.to = connectPeer(b, client.ep, server.ep.Addr())
	server.to = connectPeer(b, server.ep, client.ep.Addr())
	time.Sleep(10 * time.Millisecond) // both empty messages are in
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	client.send()
	select {
	case <-client.done:
	case st := <-failed:
		b.Fatalf("send: %v", st)
	case <-time.After(time.Minute):
		b.Fatalf("no outcome after a minute: a message was lost?")
	}
	b.StopTimer()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/2, "ns/hop")
}

// pingPongSide opens one side: a domain of its own, a poller with pc and
// an endpoint with 8 buffers each way, closed at the end of the benchmark.
func pingPongSide(b *testing.B, provider string, pc cq.Config, onData func(*rdm.Endpoint, rdm.Peer, []byte)) *rdm.Endpoint {
	b.Helper()
	addr, local := "127.0.0.1", "127.0.0.1:0"
	if provider == "shm" {
		addr, local = "", ""
	}
	mgr, err := domain.Open(domain.Config{Provider: provider, Address: addr, Endpoints: domain.EndpointRDM})
	if err != nil {
		b.Skipf("%s: %v", provider, err)
	}
	b.Cleanup(func() { _ = mgr.Close() })
	poller, err := cq.Open(mgr, pc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = poller.Close() })
	ep, err := rdm.Open(mgr, local, rdm.Config{
		Send:    netio.BufferedSendParams{BufferSize: 64, BufferCount: 8},
		Receive: netio.ReceiveParams{BufferSize: 64, BufferCount: 8},
		OnData:  onData, Runtime: cq.Runtime{Poller: poller},
		ShareProcess: true}) // both sides in this process, closed after the last message arrived
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ep.Close() })
	return ep
}

// connectPeer adds the peer at addr and sends it an empty message,
// retrying while the provider connects (ofi_rxm).
func connectPeer(b *testing.B, ep *rdm.Endpoint, addr string) rdm.Peer {
	b.Helper()
	peer, err := ep.AddPeer(addr)
	if err != nil {
		b.Fatal(err)
	}
	buf := ep.GetBuffer()
	deadline := time.Now().Add(10 * time.Second)
	for st := ep.SendBuffer(buf, 0, peer); st != netio.OK; st = ep.SendBuffer(buf, 0, peer) {
		if st != netio.NoResources || time.Now().After(deadline) {
			b.Fatalf("connecting to %s: %v", addr, st)
		}
		time.Sleep(time.Millisecond)
	}
	return peer
}

// BenchmarkPingPongSelf bounces one 64-byte message between a shm endpoint
// and itself: its OnData sends the next message to its own address with
// GetBuffer and SendBuffer, so that a whole hop (the read that returns the
// message, OnData, the send, the send's completion, the repost) runs on one
// poller goroutine and never waits for another thread. BenchmarkPingPong
// hides this CPU path behind the wait for the peer and swings with the
// load of a two-core machine; this one needs a single core, so its
// p50-ns/op (the median time from one OnData to the next, read with one
// monotonic clock read per hop, which it includes) and mid-ns/op (the mean
// of the middle 80 % of those times, finer than the clock's steps)
// compare builds on a busy machine (docs/performance.md, "shm 64 B latency: the same span on
// both sides, and where a hop's time goes"). Steady state allocates nothing.
func BenchmarkPingPongSelf(b *testing.B) {
	s := &selfPinger{pinger: pinger{size: 64, limit: b.N, done: make(chan struct{}), failed: make(chan netio.Status, 1)},
		base: time.Now(), spans: make([]time.Duration, 0, b.N)}
	s.ep = pingPongSide(b, "shm", cq.Config{}, s.onData)
	s.to = connectPeer(b, s.ep, s.ep.Addr())
	time.Sleep(10 * time.Millisecond) // the empty message is in
	b.ReportAllocs()
	b.ResetTimer()
	s.send()
	select {
	case <-s.done:
	case st := <-s.failed:
		b.Fatalf("send: %v", st)
	case <-time.After(time.Minute):
		b.Fatalf("no outcome after a minute: a message was lost?")
	}
	b.StopTimer()
	if len(s.spans) > 0 {
		slices.Sort(s.spans)
		b.ReportMetric(float64(s.spans[len(s.spans)/2]), "p50-ns/op")
		b.ReportMetric(midMean(s.spans), "mid-ns/op")
	}
}

// midMean returns the mean of the middle 80 % of sorted spans (the 10th to
// the 90th percentile), in ns: the clock here moves in steps of about 10
// ns, so the median moves in those steps too, while this mean shows a
// change of a few nanoseconds and, like the median, leaves out the hops
// that the load stretched.
func midMean(sorted []time.Duration) float64 {
	lo, hi := len(sorted)/10, len(sorted)-len(sorted)/10
	var sum time.Duration
	for _, d := range sorted[lo:hi] {
		sum += d
	}
	return float64(sum) / float64(hi-lo)
}

// selfPinger is a pinger that keeps the time between its OnData calls.
type selfPinger struct {
	pinger
	base  time.Time
	last  time.Duration
	spans []time.Duration // preallocated: appending never allocates
}

func (s *selfPinger) onData(ep *rdm.Endpoint, from rdm.Peer, data []byte) {
	if now := time.Since(s.base); len(data) > 0 {
		if s.last != 0 && len(s.spans) < cap(s.spans) {
			s.spans = append(s.spans, now-s.last)
		}
		s.last = now
	}
	s.pinger.onData(ep, from, data)
}
