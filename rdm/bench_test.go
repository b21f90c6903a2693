package rdm_test

import (
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
		// Not shm: two shm endpoints on one completion queue (one domain,
		// one poller, rdm's rule) crash libfabric 1.17 within a few thousand
		// messages; shm is measured between processes.
		b.Run(c.provider+"/"+sizeName(c.size), func(b *testing.B) {
			addr, local := "127.0.0.1", "127.0.0.1:0"
			mgr, err := domain.Open(domain.Config{Provider: c.provider, Address: addr, Endpoints: domain.EndpointRDM})
			if err != nil {
				b.Fatal(err)
			}
			defer mgr.Close()
			rx, err := rdm.Open(mgr, local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
				Receive: netio.ReceiveParams{BufferSize: c.size, BufferCount: 128}})
			if err != nil {
				b.Fatal(err)
			}
			defer rx.Close()
			freed := make(chan struct{}, 64)
			tx, err := rdm.Open(mgr, local, rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
				Send: netio.BufferedSendParams{BufferSize: c.size, BufferCount: 64},
				OnSendCompleted: func(uint64, netio.Status) {
					select {
					case freed <- struct{}{}:
					default:
					}
				}})
			if err != nil {
				b.Fatal(err)
			}
			defer tx.Close()
			peer, err := tx.AddPeer(rx.Addr())
			if err != nil {
				b.Fatal(err)
			}
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
