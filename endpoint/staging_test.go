package endpoint_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/testpattern"
)

// Shape of TestCloseKeepsSendsReportedOK.
const (
	// stallSize makes each message 64 bytes on the wire (tcp adds a
	// 16-byte header). The kernel stops taking bytes of a full socket at
	// page-sized boundaries, so with a power-of-two wire size the last
	// write that fits ends exactly there and the next send is refused
	// whole (EAGAIN), which is when tcp staged it: with the staging on,
	// every run lost the 140 messages (8960 bytes) it held. Sizes that
	// straddle the boundary end in a partial write, staged nothing, and
	// lost in some runs only.
	stallSize     = 48
	stallMessages = 1 << 20         // bound: the receiver's socket fills long before
	stallQuiet    = 1 * time.Second // no completion for this long with every buffer in flight: stalled
)

// TestCloseKeepsSendsReportedOK: a send reported OK reaches the receiver
// even when the sender closes while the receiver is behind. The receiver
// stalls in its first OnData, so that its socket and then the sender's
// fill; the sender sends until no completion comes with every buffer in
// flight, closes, and only then is the receiver released. libfabric 1.17's
// tcp completed sends it had copied into its own staging buffer
// (FI_TCP_STAGING_SBUF_SIZE, 9000 bytes by default) once the socket was
// full, and fi_close discarded them: 140 messages reported OK never
// arrived. The library turns the staging off (fabric.TCPStagingEnv).
func TestCloseKeepsSendsReportedOK(t *testing.T) {
	mgr := openDomain(t, "tcp")
	pattern := testpattern.New(stallSize, testpattern.WithHeader())
	ledger := testpattern.NewLedger(pattern, 0)

	release := make(chan struct{})
	var stallOnce, releaseOnce sync.Once
	ended := make(chan error, 1)
	l := listen(t, mgr, endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: stallSize, BufferCount: 16},
		OnData: func(_ *endpoint.ReceiveEndpoint, data []byte) {
			stallOnce.Do(func() { <-release })
			ledger.Received(data)
		},
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			select {
			case ended <- err:
			default:
			}
		},
	})
	// Released before the listener closes (cleanups run last first), also
	// when the test stops early.
	unstall := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unstall)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params:          netio.BufferedSendParams{BufferSize: stallSize, BufferCount: 64},
		OnSendCompleted: func(key uint64, st netio.Status) { ledger.Completed(key, st == netio.OK) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })

	stalled := ledger.SendUntilStalled(stallMessages, stallQuiet, func(seq uint64) bool {
		buf := s.GetBuffer()
		if buf == nil {
			return false
		}
		pattern.Fill(buf.Bytes()[:stallSize], 0, seq)
		ledger.Sent(buf.ID(), seq)
		require.Equal(t, netio.OK, s.SendBuffer(buf, stallSize), "send %d", seq)
		return true
	})
	require.True(t, stalled, "the sender never stalled: the receiver's socket did not fill")
	require.NoError(t, s.Close())
	atClose := ledger.Report()
	t.Logf("%s=%q; at Close: %d sends reported OK, %d canceled", fabric.TCPStagingEnv, fabric.TCPStaging(), atClose.OK, atClose.NotOK)
	require.NotZero(t, atClose.NotOK, "sends still pending at Close (canceled): the sender was stalled")

	unstall()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the receiving connection did not end within 30 s of the release")
	}
	rep := ledger.Report()
	t.Logf("after the release: %v", rep)
	assert.NoError(t, rep.Err())
	assert.Equal(t, atClose.OK+atClose.NotOK, rep.OK+rep.NotOK, "every send reported once, by Close")
}
