package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/testpattern"
	"github.com/netio-go/netio/rdm"
)

// TestCloseKeepsSendsReportedOK is endpoint's test of the same name on
// tcp;ofi_rxm, whose connections are tcp endpoints with the same staging
// buffer: the receiver stalls in its first OnData, the sender sends until
// it is stalled, closes, and only then is the receiver released; every
// send reported OK must arrive. 48 bytes make 128 on the wire (tcp's
// 16-byte header and ofi_rxm's 64), a power of two, so that the full
// socket refuses a send whole and tcp staged it. The two endpoints are in
// domains of their own, so that the stalled poller is not the sender's.
func TestCloseKeepsSendsReportedOK(t *testing.T) {
	const (
		size    = 48
		quiet   = time.Second
		maxSent = 1 << 20
	)
	const prov = "tcp;ofi_rxm"
	pattern := testpattern.New(size, testpattern.WithHeader())
	ledger := testpattern.NewLedger(pattern, 0)
	release := make(chan struct{})
	var stalled atomic.Bool // the receiver is in its stalled OnData
	rx := open(t, openDomain(t, prov), "127.0.0.1:0", rdm.Config{
		Receive: netio.ReceiveParams{BufferSize: size, BufferCount: 16},
		OnData: func(_ *rdm.Endpoint, _ rdm.Peer, data []byte) {
			if stalled.CompareAndSwap(false, true) {
				<-release
			}
			ledger.Received(data)
		},
	})
	var unstalled bool
	unstall := func() {
		if !unstalled {
			unstalled = true
			close(release)
		}
	}
	t.Cleanup(unstall) // before rx closes, also when the test stops early

	tx, err := rdm.Open(openDomain(t, prov), "127.0.0.1:0", rdm.Config{
		Send:            netio.BufferedSendParams{BufferSize: size, BufferCount: 64},
		OnData:          func(*rdm.Endpoint, rdm.Peer, []byte) {},
		OnSendCompleted: func(key uint64, st netio.Status) { ledger.Completed(key, st == netio.OK) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tx.Close()) })
	peer, err := tx.AddPeer(rx.Addr())
	require.NoError(t, err)

	// A quiet second alone is no stall on a loaded machine (see endpoint's
	// stallQuiet): the receiver must be in its stalled OnData, and a pass
	// of the sender's poller must complete nothing.
	confirm := func() bool { return stalled.Load() && !pollerPassCompletes(tx, tx.Stats()) }
	next := uint64(0) // all before it sent
	fill := func() {
		from := next
		sentAll := ledger.SendUntilStalledConfirmed(maxSent, quiet, func(i uint64) bool {
			buf := tx.GetBuffer()
			if buf == nil {
				return false
			}
			seq := from + i
			pattern.Fill(buf.Bytes()[:size], 0, seq)
			ledger.Sent(buf.ID(), seq)
			require.Equal(t, netio.OK, tx.SendBuffer(buf, size, peer), "send %d", seq)
			next = seq + 1
			return true
		}, confirm)
		require.True(t, sentAll, "the sender never stalled: the receiver's socket did not fill")
	}
	fill()
	// Sending may go on after the verdict all the same (see endpoint's
	// closeThenRelease): with nothing pending, stall it again.
	for range 3 {
		if st := tx.Stats(); st.Sent > st.Completed+st.Failed {
			break
		}
		fill()
	}
	require.NoError(t, tx.Close())
	atClose := ledger.Report()
	t.Logf("%s=%q; at Close: %d sends reported OK, %d not", fabric.TCPStagingEnv, fabric.TCPStaging(), atClose.OK, atClose.NotOK)
	require.NotZero(t, atClose.NotOK, "sends still pending at Close: the sender was stalled")

	unstall()
	// No end of connection to wait for (ofi_rxm reports none): wait for
	// the count while messages arrive, then say what is missing.
	assert.True(t, ledger.AwaitDelivered(atClose.OK, 30*time.Second), "every message reported OK delivered")
	rep := ledger.Report()
	t.Logf("after the release: %v", rep)
	assert.NoError(t, rep.Err())
	assert.Equal(t, atClose.OK+atClose.NotOK, rep.OK+rep.NotOK, "every send reported once, by Close")
}
