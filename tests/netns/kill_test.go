package netns

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		ctx := testContext(t)
		recv := startRole(t, ctx, tp, 1, roleReceiver, receiverConfig(tp, provider, 1))
		addr := recv.listening(t)
		cfg := senderConfig(tp, provider, 2, addr, 1, endless)
		cfg.ProgressAt = killAfter
		send := startRole(t, ctx, tp, 2, roleSender, cfg)
		send.progress(t, 0)
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
		assert.Empty(t, got.SendError)
		assert.GreaterOrEqual(t, got.Completed, uint64(killAfter))
		assert.Less(t, got.Sent, uint64(endless), "the kill came after the whole stream")
		assert.Equal(t, got.Sent, got.Completed+got.Failed, "every key reported")
		assert.Zero(t, got.Unexpected, "keys reported twice or never handed over")
		assert.Zero(t, got.Unreported, "keys never reported")
		assert.Equal(t, got.Sent, got.Stats.Sent, "endpoint's Sent")
		assert.Equal(t, got.Completed, got.Stats.Completed, "endpoint's Completed")
		assert.Equal(t, got.Failed, got.Stats.Failed, "endpoint's Failed")
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
		sent := next.senderReport(t)
		recv.closed(t, 2)
		recv.finish(t)
		got := recv.receiverReport(t)

		assert.Equal(t, uint64(2), got.Accepted)
		assert.False(t, got.TimedOut)
		require.Len(t, got.Conns, 2)
		killed := got.Conns[0]
		// A message cut short by the kill may end as a receive error
		// (sockets reports one): lost, and reported as lost.
		t.Logf("killed sender's connection: %d messages, closed with %q; %d receive errors %s",
			killed.Messages, killed.CloseError, killed.ReceiveErrors, killed.ReceiveError)
		assert.Equal(t, uint64(1), killed.Stream)
		assert.GreaterOrEqual(t, killed.Messages, uint64(killAfter))
		assert.Less(t, killed.Messages, uint64(endless))
		assert.Zero(t, killed.VerifyErrors, "the prefix before the kill, first error: %s", killed.FirstError)
		assertIntact(t, sent, got.Conns[1], 2, count)
	})
}
