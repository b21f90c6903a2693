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

// TestAddPeerHeldAtMaxPeers: with MaxPeers 1 and that one peer held,
// adding its address again gives back the peer (the table holds it
// already), while another address is refused with ErrNoResources.
func TestAddPeerHeldAtMaxPeers(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			a := open(t, mgr, p.local, rdm.Config{OnData: nop})
			b := open(t, mgr, p.local, rdm.Config{OnData: nop})
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop, MaxPeers: 1})
			first, err := tx.AddPeer(a.Addr())
			require.NoError(t, err)
			again, err := tx.AddPeer(a.Addr())
			require.NoError(t, err, "a held address at MaxPeers")
			assert.Equal(t, first, again)
			_, err = tx.AddPeer(b.Addr())
			assert.ErrorIs(t, err, netio.ErrNoResources, "a second peer at MaxPeers 1")
			assert.Equal(t, 1, tx.Peers())
		})
	}
}

// TestAddPeerRefusesNamesWithNUL: a named-address provider's peer name
// with a NUL byte is refused with ErrBadAddress (shm would read it as the
// name before the NUL: another name for a held peer, whose removal would
// unmap that peer), and the table is unchanged.
func TestAddPeerRefusesNamesWithNUL(t *testing.T) {
	for _, p := range allProviders { // one endpoint, its own name as the peer: no traffic, safe on shm
		if !quirks.For(p.name).NamedAddresses {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			tx := open(t, mgr, p.local, rdm.Config{OnData: nop})
			held, err := tx.AddPeer(tx.Addr())
			require.NoError(t, err)
			_, err = tx.AddPeer(tx.Addr() + "\x00other")
			assert.ErrorIs(t, err, netio.ErrBadAddress)
			assert.Equal(t, 1, tx.Peers())
			again, err := tx.AddPeer(tx.Addr())
			require.NoError(t, err)
			assert.Equal(t, held, again, "the held peer is untouched")
		})
	}
}
