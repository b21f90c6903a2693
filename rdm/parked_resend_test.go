package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// TestResendFromFailedLane: a completion callback that sends again to the
// peer whose lane is being failed (PeerTimeout) does not park its resend
// behind the sends being failed: the lane is empty and unreachable by then,
// so the resend fails at once, and the poller returns (an AddPeer from
// another goroutine, which waits for it, goes through). Were the resend
// parked in the dying lane it would fail, be resent, and so on for ever;
// the callback gives up after resendLimit failures so that such a poller
// returns in the end, and the count of failures tells.
func TestResendFromFailedLane(t *testing.T) {
	const sends, resendLimit = 4, 100000
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var tx *rdm.Endpoint
			var peer rdm.Peer
			var failed, refusedAtOnce atomic.Int64
			tx = open(t, mgr, p.local, rdm.Config{OnData: nop, PeerTimeout: 50 * time.Millisecond,
				OnSendCompleted: func(_ uint64, st netio.Status) {
					if st != netio.Failed || failed.Add(1) > resendLimit {
						return
					}
					buf := tx.GetBuffer()
					if buf == nil {
						return
					}
					if tx.SendBuffer(buf, 8, peer) != netio.OK {
						refusedAtOnce.Add(1)
						_, _ = tx.ReleaseBuffer(buf.ID())
					}
				}})
			peer = deadPeer(t, tx)
			// All from the poller goroutine, in one turn: every send is in
			// the lane before it can time out, so the lane fails them at once.
			rdm.OnPoller(tx, func() {
				for range sends {
					buf := tx.GetBuffer()
					if assert.NotNil(t, buf) {
						assert.Equal(t, netio.OK, tx.SendBuffer(buf, 8, peer))
					}
				}
			})
			require.Eventually(t, func() bool { return failed.Load() >= sends }, 20*time.Second, time.Millisecond,
				"the lane did not time out")
			added := make(chan error, 1)
			go func() {
				_, err := tx.AddPeer("127.0.0.1:2")
				added <- err
			}()
			select {
			case err := <-added:
				assert.NoError(t, err)
			case <-time.After(20 * time.Second):
				require.FailNow(t, "AddPeer did not return: the poller is stuck failing resends")
			}
			assert.Equal(t, int64(sends), failed.Load(), "each parked send fails once; no resend is parked and failed again")
			assert.Equal(t, int64(sends), refusedAtOnce.Load(), "each resend to the unreachable peer is refused at once")
		})
	}
}
