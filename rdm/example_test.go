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
