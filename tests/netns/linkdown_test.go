package netns

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Link-down settings: the sender's ProgressTimeout, and the slack allowed
// on top of the 1.25 × ProgressTimeout the endpoint promises, for the time
// the provider takes to stop accepting data once the link is gone, the
// script that pulls the cable, and a loaded 2-core machine.
const (
	linkProgressTimeout = time.Second
	linkDetectSlack     = 3 * time.Second
	linkRedialCount     = 2000
)

// TestLinkDown pulls the sender's cable mid-stream and leaves it out. The
// kernel's TCP would retry for many minutes; the sender's ProgressTimeout
// ends the connection instead: within the bound, the application hears
// connection-closed with netio.ErrTimeout, every pending key comes back
// failed exactly once, and every send buffer is free again. Once the cable
// is back, the same process dials again and a new stream arrives intact.
//
// On sockets too: sockets completes a send once it has copied it into its
// own buffer, but with the link gone the kernel's socket buffer fills, the
// provider stops taking data, and the timeout fires the same way.
func TestLinkDown(t *testing.T) {
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		recv, send := streamEndlessly(t, testContext(t), tp, provider, func(cfg *roleConfig) {
			cfg.ProgressTimeout, cfg.Redial = linkProgressTimeout, linkRedialCount
		})
		tp.setLink(t, 2, false)
		down := time.Now()
		closed := send.closed(t, 0)
		detect := time.Since(down)
		first := send.phaseReport(t)
		t.Logf("link down → connection closed in %v (stall before the close %v): sent %d, completed %d, failed %d (canceled %d); %q",
			detect.Round(time.Millisecond), first.Stall.Round(time.Millisecond),
			first.Sent, first.Completed, first.Failed, first.Canceled, first.CloseError)

		bound := linkProgressTimeout*5/4 + linkDetectSlack
		assert.LessOrEqual(t, detect, bound, "pending sends failed too late")
		assert.True(t, closed.Timeout, "closed by the progress timeout, got %q", closed.Error)
		assert.True(t, first.Closed, "the sender saw the connection close")
		assert.True(t, first.TimeoutClosed, "close error matches netio.ErrTimeout, got %q", first.CloseError)
		assert.True(t, first.PeerClosed, "close error matches netio.ErrConnectionClosed, got %q", first.CloseError)
		// The watchdog waits the whole timeout without progress, never less
		// (10 ms spare: the role reads the clock a moment after the
		// endpoint counted the last completion).
		assert.GreaterOrEqual(t, first.Stall, linkProgressTimeout-10*time.Millisecond, "closed before the timeout")
		assert.LessOrEqual(t, first.Stall, bound)
		assert.Positive(t, first.Failed, "the timeout fires only with sends pending")
		assertEveryKeyOnce(t, first)
		assert.Equal(t, sendBuffers, first.AvailableBuffers, "send buffers back")
		assert.Zero(t, first.PendingSends, "pending sends after the close")

		tp.setLink(t, 2, true)
		// The port is up at once, but the host hears of its carrier and
		// its neighbour entry recovers only later: a dial at once failed
		// with "No route to host" on a loaded machine. A ping that comes
		// back says the path is there again.
		tp.waitReachable(t, 2, 1)
		send.tell(t, "redial")
		second := send.senderReport(t)
		// What the first connection delivered depends on what the kernel
		// still retransmits once the cable is back; whatever it is, it is
		// an intact prefix of the stream, and no more than was sent. Sends
		// complete once the provider or the kernel holds them, so those
		// still in the sender's kernel when the cable went may never
		// arrive: completed, yet lost. Only DeliveryComplete (tcp) waits
		// for the peer; see TestServerRestart.
		cut := finishBrokenThenIntact(t, recv, second, linkRedialCount)
		t.Logf("cut connection at the receiver: %d messages (%d completed at the sender), closed %v %q, %d receive errors %s",
			cut.Messages, first.Completed, cut.Closed, cut.CloseError, cut.ReceiveErrors, cut.ReceiveError)
		assert.LessOrEqual(t, cut.Messages, first.Sent)
		assert.Equal(t, sendBuffers, second.AvailableBuffers, "send buffers back")
	})
}
