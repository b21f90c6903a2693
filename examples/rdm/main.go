// Command rdm streams messages from one connectionless endpoint to several
// others through one libfabric domain: the shape of a readout process that
// sends fragments to many event builders without a connection per pair.
//
//	go run ./examples/rdm [-provider 'tcp;ofi_rxm'] [-receivers 4] [-count 1000]
//
// Each receiver checks that it got every message addressed to it, in any
// order, and the sender that every send was reported exactly once.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

func main() {
	provider := flag.String("provider", "tcp;ofi_rxm", "libfabric RDM provider (tcp;ofi_rxm, udp;ofi_rxd, sockets, shm)")
	receivers := flag.Int("receivers", 4, "receiving endpoints")
	count := flag.Int("count", 1000, "messages to each receiver")
	flag.Parse()
	if err := run(*provider, *receivers, *count); err != nil {
		log.Fatal(err)
	}
}

func run(provider string, receivers, count int) error {
	local, addr := "127.0.0.1", "127.0.0.1:0"
	if provider == "shm" { // shm names endpoints itself
		local, addr = "", ""
	}
	mgr, err := domain.Open(domain.Config{Provider: provider, Address: local, Endpoints: domain.EndpointRDM})
	if err != nil {
		return err
	}
	defer mgr.Close() // last: after every endpoint

	// The receivers: each counts the messages addressed to it. OnData runs
	// on the poller goroutine and must not block.
	var mu sync.Mutex
	seen := make([]map[uint32]bool, receivers)
	var addrs []string
	for i := range receivers {
		seen[i] = map[uint32]bool{}
		rx, err := rdm.Open(mgr, addr, rdm.Config{OnData: func(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
			mu.Lock()
			seen[binary.LittleEndian.Uint32(data)][binary.LittleEndian.Uint32(data[4:])] = true
			mu.Unlock()
		}, ShareProcess: true})
		if err != nil {
			return err
		}
		defer rx.Close()
		addrs = append(addrs, rx.Addr())
	}

	// The sender: one endpoint, a peer per receiver, one key per buffer.
	var reported sync.WaitGroup
	reported.Add(receivers * count)
	var failed int
	tx, err := rdm.Open(mgr, addr, rdm.Config{
		OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
		OnSendCompleted: func(_ uint64, st netio.Status) {
			if st != netio.OK {
				failed++ // the poller goroutine only
			}
			reported.Done()
		},
		// shm opens one endpoint per process unless every one sets this
		// (rdm.ErrOneEndpointPerProcess): this demo keeps all in one
		// process and closes them once every message arrived (it waits up
		// to 10 s; on shm a run that times out may crash at Close). A
		// readout program opens one endpoint per process instead.
		ShareProcess: true,
	})
	if err != nil {
		return err
	}
	defer tx.Close()
	peers := make([]rdm.Peer, receivers)
	for i, a := range addrs {
		if peers[i], err = tx.AddPeer(a); err != nil {
			return err
		}
	}
	for seq := range count {
		for i, peer := range peers {
			if err := send(tx, peer, uint32(i), uint32(seq)); err != nil {
				return err
			}
		}
	}
	reported.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := true
		for i := range seen {
			done = done && len(seen[i]) == count
		}
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range seen {
		fmt.Fprintf(os.Stdout, "receiver %d (%s): %d of %d messages\n", i, addrs[i], len(seen[i]), count)
	}
	fmt.Printf("sender: %d sends, %d failed\n", receivers*count, failed)
	return nil
}

// send sends message seq of receiver i, waiting for a buffer and retrying
// while the provider cannot take it yet (ofi_rxm connects on first send).
func send(tx *rdm.Endpoint, peer rdm.Peer, i, seq uint32) error {
	buf := tx.GetBuffer()
	for ; buf == nil; buf = tx.GetBuffer() {
		time.Sleep(10 * time.Microsecond) // every buffer in flight
	}
	binary.LittleEndian.PutUint32(buf.Bytes(), i)
	binary.LittleEndian.PutUint32(buf.Bytes()[4:], seq)
	for {
		switch st := tx.SendBuffer(buf, 8, peer); st {
		case netio.OK:
			return nil
		case netio.NoResources:
			time.Sleep(10 * time.Microsecond)
		default:
			return fmt.Errorf("send %d to receiver %d: %v", seq, i, st)
		}
	}
}
