package rdm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/rdm"
)

// TestRemovedDeadPeersConfirmSlotComesBack: a peer removed while its
// tracked inject is in flight, which then dies (its connection reset with
// the inject unsent), gives its confirm slot back as soon as ofi_rxm fails
// that send, not at Close; and the injects it would have confirmed, left
// out by RemovePeer, are counted unconfirmed then. Only a provider that
// never completes such a send (udp;ofi_rxd) holds the slot until Close.
func TestRemovedDeadPeersConfirmSlotComesBack(t *testing.T) {
	const n = 10
	s := stickInjects(t, n, rdm.Config{})
	require.NoError(t, s.tx.RemovePeer(s.peer))
	assert.Zero(t, s.tx.Stats().InjectsUnconfirmed, "the tracked inject in flight covers the ones before it")
	assert.Equal(t, 1, s.tx.Stats().InjectConfirmsHeld)
	s.die()
	if !assert.Eventually(t, func() bool { return s.tx.Stats().InjectConfirmsHeld == 0 }, 20*time.Second, time.Millisecond,
		"the failed confirm's slot back before Close") {
		t.Logf("%+v", s.tx.Stats())
		return
	}
	st := s.tx.Stats()
	t.Logf("after the reset: %+v", st)
	assert.Equal(t, uint64(n-1), st.InjectsUnconfirmed, "its failure leaves the covered injects unconfirmed")
	assert.Positive(t, st.Failed, "the tracked inject failed")
}
