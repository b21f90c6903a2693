package rdm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/rdm"
)

// TestPendingWhileSendsInFlight: an endpoint tells its poller that sends
// are pending from the post until the completion, so that a poller without
// a wait descriptor keeps progressing them (poll.Pender). The receiver, in
// a domain of its own, holds its poller in OnData, so a 64 KiB send (a
// rendezvous on tcp;ofi_rxm, which the receiver's progress must read)
// stays in flight until it lets go.
func TestPendingWhileSendsInFlight(t *testing.T) {
	const size = 64 << 10
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			if quirks.For(p.name).CompletesWhenStaged {
				t.Skipf("%s completes a send once staged, without the receiver's progress", p.name)
			}
			hold, arrived := make(chan struct{}), make(chan struct{}, 2)
			rx := open(t, openDomain(t, p.name), p.local, rdm.Config{
				Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 4},
				OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {
					arrived <- struct{}{}
					<-hold
				},
			})
			completed := make(chan netio.Status, 2)
			tx := open(t, openDomain(t, p.name), p.local, rdm.Config{
				Send:            netio.BufferedSendParams{BufferSize: size, BufferCount: 2},
				OnData:          func(*rdm.Endpoint, rdm.Peer, []byte) {},
				OnSendCompleted: func(_ uint64, st netio.Status) { completed <- st },
			})
			assert.False(t, rdm.Pending(tx), "nothing sent yet")
			send(t, tx, rx.Addr(), make([]byte, size))
			<-arrived // the receiver's poller is held in OnData from here on
			send(t, tx, rx.Addr(), make([]byte, size))
			assert.True(t, rdm.Pending(tx), "a send posted and not completed is pending")
			close(hold)
			for range 2 {
				select {
				case st := <-completed:
					assert.Equal(t, netio.OK, st)
				case <-time.After(10 * time.Second):
					require.Fail(t, "a send did not complete")
				}
			}
			assert.False(t, rdm.Pending(tx), "every send completed")
		})
	}
}
