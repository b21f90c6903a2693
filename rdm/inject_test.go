package rdm_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// TestInject: injects arrive whole, in order with the buffered sends
// around them, and count as completed; the caller's data may change at
// once.
func TestInject(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop, InjectQueue: 4})
			peer, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			send(t, tx, rx.Addr(), []byte("first")) // ofi_rxm connects on the first send
			require.Eventually(t, func() bool { return in.count() == 1 }, 10*time.Second, time.Millisecond)
			const n = 500
			data := make([]byte, 32)
			for i := range n {
				copy(data, fmt.Sprintf("inject %04d", i))
				st := tx.Inject(data, peer)
				for deadline := time.Now().Add(10 * time.Second); st == netio.NoResources && time.Now().Before(deadline); {
					time.Sleep(20 * time.Microsecond)
					st = tx.Inject(data, peer)
				}
				require.Equal(t, netio.OK, st, "inject %d", i)
				clear(data) // the queue holds a copy
			}
			require.Eventually(t, func() bool { return in.count() == n+1 }, 10*time.Second, time.Millisecond)
			in.mu.Lock()
			for i, m := range in.msgs[1:] {
				assert.Equal(t, fmt.Sprintf("inject %04d", i), string(m[:11]), "in order, intact")
			}
			in.mu.Unlock()
			require.Eventually(t, func() bool { return tx.Stats().Completed == n+1 }, 5*time.Second, time.Millisecond)
			assert.Zero(t, tx.Stats().Failed)
		})
	}
}

// TestInjectQueueFull: while the poller cannot drain (a callback holds
// it), Inject takes InjectQueue messages and then says NoResources without
// blocking; once the poller is free they all go out.
func TestInjectQueueFull(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			const queue = 3
			h := holdPoller(t, p.name, p.local, queue)
			tx, peer, in := h.tx, h.peer, h.in
			for i := range queue {
				assert.Equal(t, netio.OK, tx.Inject([]byte{byte(i)}, peer), "inject %d is queued", i)
			}
			start := time.Now()
			assert.Equal(t, netio.NoResources, tx.Inject([]byte{9}, peer), "the queue is full")
			assert.Less(t, time.Since(start), 5*time.Second, "NoResources at once, never a wait for the poller")
			h.release()
			require.Eventually(t, func() bool { return in.count() == queue+1 }, 10*time.Second, time.Millisecond)
			in.mu.Lock()
			for i := range queue {
				assert.Equal(t, []byte{byte(i)}, in.msgs[i+1])
			}
			in.mu.Unlock()
			assert.Equal(t, netio.OK, tx.Inject([]byte{7}, peer), "room again")
		})
	}
}

// TestInjectToRemovedPeer: an inject queued for a peer removed before the
// poller posts it is counted Failed and reaches nobody, even a peer added
// afterwards that the provider gives the old address.
func TestInjectToRemovedPeer(t *testing.T) {
	mgr := openDomain(t, "tcp;ofi_rxm")
	tx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: nop, InjectQueue: 8})
	// Nobody listens there: ofi_rxm keeps refusing with EAGAIN while it
	// connects, so the injects stay queued.
	dead, err := tx.AddPeer("127.0.0.1:1")
	require.NoError(t, err)
	queued := 0
	for ; queued < 8 && tx.Inject([]byte("lost"), dead) == netio.OK; queued++ {
	}
	require.Positive(t, queued)
	require.NoError(t, tx.RemovePeer(dead))
	assert.Equal(t, netio.InvalidArgument, tx.Inject([]byte("x"), dead), "a removed peer is refused")
	var in inbox
	rx := open(t, mgr, "127.0.0.1:0", rdm.Config{OnData: in.onData})
	_, err = tx.AddPeer(rx.Addr()) // may take the removed peer's address
	require.NoError(t, err)
	require.Eventually(t, func() bool { return tx.Stats().Failed == uint64(queued) }, 10*time.Second, time.Millisecond,
		"every queued inject failed once")
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, in.count(), "nothing reached the new peer")
	assert.Zero(t, tx.Stats().Completed)
}

// held is a sender and its peer, a receiver whose OnData holds the
// domain's poller, and what the receiver got.
type held struct {
	tx      *rdm.Endpoint
	peer    rdm.Peer
	in      *inbox
	release func() // lets the poller go on; idempotent, and called at the test's end
}

// holdPoller opens a receiver and a sender with an inject queue of queue
// in one domain of provider, and holds their poller in the receiver's
// OnData (a "hold" message, the first in in) until release.
func holdPoller(t *testing.T, provider, local string, queue int) held {
	t.Helper()
	mgr := openDomain(t, provider)
	hold, holding := make(chan struct{}), make(chan struct{}, 1)
	in := &inbox{}
	rx := open(t, mgr, local, rdm.Config{OnData: func(e *rdm.Endpoint, from rdm.Peer, data []byte) {
		if string(data) == "hold" {
			holding <- struct{}{}
			<-hold // the poller of the domain waits here, bounded by the test
		}
		in.onData(e, from, data)
	}})
	tx := open(t, mgr, local, rdm.Config{OnData: nop, InjectQueue: queue})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release) // before the endpoints close
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)
	send(t, tx, rx.Addr(), []byte("hold"))
	select {
	case <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold message did not arrive")
	}
	return held{tx: tx, peer: peer, in: in, release: release}
}
