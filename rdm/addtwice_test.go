package rdm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/rdm"
)

// TestAddPeerTwiceIsOnePeer: adding the same address twice gives back the
// same handle and one peer, on every provider, whatever the provider's
// fi_av_insert does with a duplicate (sockets gives a second address
// vector entry), and the address vector is empty again after one
// RemovePeer: a send to the handle still arrives and names its sender as
// that handle.
func TestAddPeerTwiceIsOnePeer(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var in inbox
			rx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop})
			first, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			again, err := tx.AddPeer(rx.Addr())
			require.NoError(t, err)
			assert.Equal(t, first, again, "the same address twice is one peer")
			assert.Equal(t, 1, tx.Peers())
			back, err := rx.AddPeer(tx.Addr())
			require.NoError(t, err)
			backAgain, err := rx.AddPeer(tx.Addr())
			require.NoError(t, err)
			assert.Equal(t, back, backAgain)

			send(t, tx, rx.Addr(), []byte("once"))
			require.Eventually(t, func() bool { return in.count() == 1 }, 10*time.Second, time.Millisecond)
			if !quirks.For(p.name).NoSources {
				in.mu.Lock()
				assert.Equal(t, back, in.from[0], "the sender named by its one handle")
				in.mu.Unlock()
			}
			require.NoError(t, tx.RemovePeer(first))
			assert.Zero(t, tx.Peers())
			assert.Error(t, tx.RemovePeer(again), "one peer, removed once")
		})
	}
}
