package netns

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// In the kill tests a sender is asked for far more messages than it can
// send before the kill, so the kill lands mid-stream; killAfter messages
// have gone through by then.
const (
	endless   = 1_000_000
	killAfter = 2000
)

// TestKillReceiver kills the receiving process mid-stream: the sender sees
// the connection closed by the peer, and every key it handed over is
// reported exactly once, completed or failed.
func TestKillReceiver(t *testing.T) {
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		recv, send := streamEndlessly(t, testContext(t), tp, provider, nil)
		recv.kill(t)
		killed := time.Now()
		send.closed(t, 0)
		t.Logf("sender saw the close %v after the kill", time.Since(killed).Round(time.Millisecond))

		got := send.senderReport(t)
		t.Logf("sender: sent %d, completed %d, failed %d (canceled %d), posts refused %d; %q; reported %v after the kill",
			got.Sent, got.Completed, got.Failed, got.Canceled, got.Refused, got.CloseError,
			time.Since(killed).Round(time.Millisecond))
		assert.True(t, got.Closed, "the sender saw the connection close")
		assert.True(t, got.PeerClosed, "closed by the peer, got %q", got.CloseError)
		assert.False(t, got.TimedOut, "sender timed out")
		assert.GreaterOrEqual(t, got.Completed, uint64(killAfter))
		assert.Less(t, got.Sent, uint64(endless), "the kill came after the whole stream")
		assertEveryKeyOnce(t, got)
	})
}

// TestKillSender kills a sending process mid-stream: the receiver sees the
// connection closed by the peer after an intact prefix of the stream, and
// its listener keeps accepting: a sender on another host connects and
// streams intact.
func TestKillSender(t *testing.T) {
	onEachProvider(t, 3, func(t *testing.T, provider string, tp *topology) {
		ctx := testContext(t)
		rcfg := receiverConfig(tp, provider, 1)
		rcfg.ProgressAt = killAfter
		recv := startRole(t, ctx, tp, 1, roleReceiver, rcfg)
		addr := recv.listening(t)

		doomed := startRole(t, ctx, tp, 2, roleSender, senderConfig(tp, provider, 2, addr, 1, endless))
		recv.progress(t, 1)
		doomed.kill(t)
		killedAt := time.Now()
		closed := recv.closed(t, 1)
		t.Logf("receiver saw the close %v after the kill", time.Since(killedAt).Round(time.Millisecond))
		assert.True(t, closed.PeerClosed, "closed by the peer, got %q", closed.Error)

		const count = 5000
		next := startRole(t, ctx, tp, 3, roleSender, senderConfig(tp, provider, 3, addr, 2, count))
		killed := finishBrokenThenIntact(t, recv, next.senderReport(t), count)
		// A message cut short by the kill may end as a receive error
		// (sockets reports one): lost, and reported as lost.
		t.Logf("killed sender's connection: %d messages, closed with %q; %d receive errors %s",
			killed.Messages, killed.CloseError, killed.ReceiveErrors, killed.ReceiveError)
		assert.GreaterOrEqual(t, killed.Messages, uint64(killAfter))
		assert.Less(t, killed.Messages, uint64(endless))
	})
}
