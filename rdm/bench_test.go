package rdm_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

// BenchmarkSendBuffer streams messages from one endpoint to another of the
// same domain: GetBuffer, SendBuffer to a peer, completion, receive,
// repost. It reports allocations per message of the whole round.
func BenchmarkSendBuffer(b *testing.B) {
	for _, c := range []struct {
		provider string
		size     int
	}{{"tcp;ofi_rxm", 4 << 10}, {"tcp;ofi_rxm", 64 << 10}, {"sockets", 4 << 10}} {
		// Not shm: it opens one endpoint per process
		// (rdm.ErrOneEndpointPerProcess), and this benchmark closes the
		// sender with messages still on their way, which crashes
		// libfabric 1.17 (TestShmCloseBesideAnother); shm is measured
		// between processes.
		b.Run(c.provider+"/"+sizeName(c.size), func(b *testing.B) {
			freed := make(chan struct{}, 64)
			tx, peer, done := benchPair(b, c.provider, c.size, rdm.Config{
				Send:            netio.BufferedSendParams{BufferSize: c.size, BufferCount: 64},
				OnSendCompleted: signal(freed)})
			defer done()
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				buf := tx.GetBuffer()
				for buf == nil {
					<-freed // a completion gave one back (one signal per completion, 64 fit)
					buf = tx.GetBuffer()
				}
				for st := tx.SendBuffer(buf, c.size, peer); st != netio.OK; st = tx.SendBuffer(buf, c.size, peer) {
					if st != netio.NoResources {
						b.Fatal(st)
					}
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// BenchmarkInject injects 64-byte messages from one endpoint into another
// of the same domain: copy into the inject queue, the poller's fi_inject,
// receive, repost; a full queue waits in WaitInject. Steady state
// allocates nothing.
func BenchmarkInject(b *testing.B) {
	for _, provider := range []string{"tcp;ofi_rxm", "sockets"} {
		b.Run(provider, func(b *testing.B) {
			tx, peer, done := benchPair(b, provider, 64, rdm.Config{})
			defer done()
			data := make([]byte, 64)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for st := tx.Inject(data, peer); st != netio.OK; st = tx.Inject(data, peer) {
					if st != netio.NoResources {
						b.Fatal(st)
					}
					if err := tx.WaitInject(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSendZeroCopy sends a 16-byte header and data from Go memory to a
// peer: header slot, pin, cached registration, the poller's fi_sendv,
// completion, receive. Steady state allocates nothing.
func BenchmarkSendZeroCopy(b *testing.B) {
	for _, c := range []struct {
		provider string
		size     int
	}{{"tcp;ofi_rxm", 4 << 10}, {"tcp;ofi_rxm", 64 << 10}, {"sockets", 4 << 10}} {
		b.Run(c.provider+"/"+sizeName(c.size), func(b *testing.B) {
			freed := make(chan struct{}, 64)
			tx, peer, done := benchPair(b, c.provider, c.size+16, rdm.Config{ZeroCopy: &rdm.ZeroCopyConfig{
				HeaderCount:     64,
				OnSendCompleted: signal(freed)}})
			defer done()
			header, data := make([]byte, 16), make([]byte, c.size)
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for st := tx.SendZeroCopy(header, data, uint64(i), peer); st != netio.OK; st = tx.SendZeroCopy(header, data, uint64(i), peer) {
					if st != netio.NoResources {
						b.Fatal(st)
					}
					<-freed // a completion gave a slot back
				}
			}
		})
	}
}

// benchPair opens a domain of provider with a receiver of size-byte
// buffers and a sender with cfg (OnData set), and returns the sender, its
// peer (the receiver, connected by one message) and the cleanup.
func benchPair(b *testing.B, provider string, size int, cfg rdm.Config) (*rdm.Endpoint, rdm.Peer, func()) {
	b.Helper()
	mgr, err := domain.Open(domain.Config{Provider: provider, Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
	if err != nil {
		b.Fatal(err)
	}
	rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
		Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 128}})
	if err != nil {
		b.Fatal(err)
	}
	cfg.OnData = func(*rdm.Endpoint, rdm.Peer, []byte) {}
	tx, err := rdm.Open(mgr, "127.0.0.1:0", cfg)
	if err != nil {
		b.Fatal(err)
	}
	done := func() { _ = tx.Close(); _ = rx.Close(); _ = mgr.Close() }
	peer, err := tx.AddPeer(rx.Addr())
	if err != nil {
		done()
		b.Fatal(err)
	}
	return tx, peer, done
}

// signal is an OnSendCompleted that signals freed once per completion,
// without blocking when it is full.
func signal(freed chan<- struct{}) func(uint64, netio.Status) {
	return func(uint64, netio.Status) {
		select {
		case freed <- struct{}{}:
		default:
		}
	}
}

// BenchmarkSendMessage coalesces 64-byte messages to one peer: copy into
// the peer's buffer, a full buffer posted through the poller, completion,
// receive (not decoded). Steady state allocates nothing.
func BenchmarkSendMessage(b *testing.B) {
	for _, provider := range []string{"tcp;ofi_rxm", "sockets"} {
		b.Run(provider, func(b *testing.B) {
			tx, peer, done := benchPair(b, provider, 64<<10, rdm.Config{
				Send:     netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 16},
				Coalesce: &rdm.CoalesceConfig{}})
			defer done()
			data := make([]byte, 64)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for st := tx.SendMessage(1, data, peer); st != netio.OK; st = tx.SendMessage(1, data, peer) {
					if st != netio.NoResources {
						b.Fatal(st)
					}
					runtime.Gosched()
				}
			}
		})
	}
}
