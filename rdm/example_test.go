package rdm_test

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

// A receiver and a sender on one connectionless domain: the sender adds
// the receiver as a peer and sends it a buffer; the receiver names the
// sender it added.
func Example() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp;ofi_rxm", Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close() // last: after every endpoint

	got := make(chan string, 1)
	rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{
		// Runs on the poller goroutine; data is valid only during the call.
		OnData: func(_ *rdm.Endpoint, _ rdm.Peer, data []byte) { got <- string(data) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()

	done := make(chan netio.Status, 1)
	tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{
		OnData:          func(*rdm.Endpoint, rdm.Peer, []byte) {},
		OnSendCompleted: func(_ uint64, st netio.Status) { done <- st },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Close()

	peer, err := tx.AddPeer(rx.Addr()) // a small value, not a connection
	if err != nil {
		fmt.Println(err)
		return
	}
	buf := tx.GetBuffer()
	n := copy(buf.Bytes(), "fragment 1")
	// NoResources: ofi_rxm is still connecting to the peer; retry.
	for st := tx.SendBuffer(buf, n, peer); st != netio.OK; st = tx.SendBuffer(buf, n, peer) {
		if st != netio.NoResources {
			fmt.Println(st)
			return
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println(<-done, <-got)
	// Output: OK fragment 1
}

// Small messages to a peer, coalesced: each peer has a coalescing buffer of
// its own, posted when full, after the flush interval, on Flush or Close;
// the receiver decodes the buffers with OnMessage.
func ExampleEndpoint_SendMessage() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp;ofi_rxm", Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()

	got := make(chan string, 2)
	rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{
		OnMessage: func(_ *rdm.Endpoint, _ rdm.Peer, tag uint64, data []byte, _ uint8) {
			got <- fmt.Sprintf("tag %d: %s", tag, data)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()

	tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{
		OnData:   func(*rdm.Endpoint, rdm.Peer, []byte) {},
		Coalesce: &rdm.CoalesceConfig{FlushInterval: time.Millisecond},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Close()
	peer, err := tx.AddPeer(rx.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, m := range []string{"first", "second"} {
		// Copied at once: the data may be reused. NoResources: every send
		// buffer is in flight; retry after a completion.
		if st := tx.SendMessage(uint64(7+i), []byte(m), peer); st != netio.OK {
			fmt.Println(st)
			return
		}
	}
	tx.Flush(peer) // or let the flush interval post it
	fmt.Println(<-got)
	fmt.Println(<-got)
	// Output:
	// tag 7: first
	// tag 8: second
}
