// Package netns tests netio between hosts: network namespaces on this
// machine, joined by a switch, built by hack/netns.sh. Each test creates
// its own topology and removes it when it ends, pass or fail. The hosts
// run roles (a sender, a receiver, a reconnecting sender) in child
// processes: this test binary started again inside a namespace, reporting
// JSON events on stdout, so that a test can kill one side with SIGKILL and
// read what the other side saw.
//
// The tests need root and a kernel with network namespaces, veth and
// bridge; elsewhere they skip and say why. The netem test also needs
// sch_netem, and the loss tests, which stand in for it where the kernel
// has none, nft (nftables) and ping (iputils-ping).
package netns

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain runs a role when the environment names one, the tests
// otherwise. Before the tests it removes topologies left by test runs
// that were killed before their cleanup ran.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	pruneStale()
	code := m.Run()
	netioPerf.Remove()
	os.Exit(code)
}

// Settings shared by the tests.
const (
	msgSize     = 4096
	recvBuffers = 64
	// sendBuffers stays below recvBuffers: the sockets provider livelocks
	// under CPU load when a sender has more in flight than the receiver
	// has posted.
	sendBuffers = 32
	// testTimeout bounds each test; roles give up a little earlier, so
	// that a stuck one still reports what it saw.
	testTimeout = 90 * time.Second
	roleTimeout = testTimeout - 15*time.Second
)

// onEachProvider runs test as a parallel subtest per provider, each on a
// topology of its own with hosts hosts.
func onEachProvider(t *testing.T, hosts int, test func(t *testing.T, provider string, tp *topology)) {
	for _, provider := range []string{"tcp", "sockets"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			test(t, provider, newTopology(t, hosts))
		})
	}
}

// testContext bounds a test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// receiverConfig configures a receiver on host i.
func receiverConfig(tp *topology, provider string, i int) roleConfig {
	return roleConfig{Provider: provider, Local: tp.addr(i), Size: msgSize, Buffers: recvBuffers, Timeout: roleTimeout}
}

// senderConfig configures a sender on host i that sends count messages of
// stream to addr.
func senderConfig(tp *topology, provider string, i int, addr string, stream, count uint64) roleConfig {
	return roleConfig{Provider: provider, Local: tp.addr(i), Connect: addr, Stream: stream, Count: count,
		Size: msgSize, Buffers: sendBuffers, Timeout: roleTimeout}
}

// streamRun is one stream from host 2 to a receiver on host 1.
type streamRun struct {
	provider string
	count    uint64
	// midway, when set, runs once the receiver has a quarter of the
	// messages: the fault to inject mid-stream.
	midway func(t *testing.T)
}

// run streams, checks that the stream arrived intact and returns how long
// it took, processes' start included.
func (s streamRun) run(t *testing.T, tp *topology) time.Duration {
	t.Helper()
	ctx := testContext(t)
	start := time.Now()
	rcfg := receiverConfig(tp, s.provider, 1)
	if s.midway != nil {
		rcfg.ProgressAt = s.count / 4
	}
	recv := startRole(t, ctx, tp, 1, roleReceiver, rcfg)
	addr := recv.listening(t)
	const stream = 1
	send := startRole(t, ctx, tp, 2, roleSender, senderConfig(tp, s.provider, 2, addr, stream, s.count))
	if s.midway != nil {
		recv.progress(t, 1)
		s.midway(t)
	}
	sent := send.senderReport(t)
	recv.closed(t, 1) // the sender closed after its last completion
	recv.finish(t)
	got := recv.receiverReport(t)
	took := time.Since(start)

	assert.Equal(t, uint64(1), got.Accepted)
	assert.False(t, got.TimedOut)
	if assert.Len(t, got.Conns, 1) {
		assertIntact(t, sent, got.Conns[0], stream, s.count)
	}
	return took
}

// streamEndlessly starts a receiver on host 1 and a sender on host 2 that
// streams far more than it can before the test acts, adjusted by adjust
// (which may be nil), and returns once killAfter sends have completed:
// mid-stream, for a fault.
func streamEndlessly(t *testing.T, ctx context.Context, tp *topology, provider string, adjust func(*roleConfig)) (recv, send *child) {
	t.Helper()
	recv = startRole(t, ctx, tp, 1, roleReceiver, receiverConfig(tp, provider, 1))
	cfg := senderConfig(tp, provider, 2, recv.listening(t), 1, endless)
	cfg.ProgressAt = killAfter
	if adjust != nil {
		adjust(&cfg)
	}
	send = startRole(t, ctx, tp, 2, roleSender, cfg)
	send.progress(t, 0)
	return recv, send
}

// assertEveryKeyOnce checks that a sender whose connection broke saw each
// key it handed over reported exactly once, and that its counts agree
// with the endpoint's.
func assertEveryKeyOnce(t *testing.T, got senderReport) {
	t.Helper()
	assert.Empty(t, got.SendError)
	assert.Equal(t, got.Sent, got.Completed+got.Failed, "every key reported")
	assert.Zero(t, got.Unexpected, "keys reported twice or never handed over")
	assert.Zero(t, got.Unreported, "keys never reported")
	assert.Equal(t, got.Sent, got.Stats.Sent, "endpoint's Sent")
	assert.Equal(t, got.Completed, got.Stats.Completed, "endpoint's Completed")
	assert.Equal(t, got.Failed, got.Stats.Failed, "endpoint's Failed")
}

// finishBrokenThenIntact waits for a receiver's second connection to
// close, finishes the receiver, and checks what it saw: a first
// connection of stream 1, broken by a fault, that delivered an intact
// prefix, then a second one that carried stream 2 intact from the sender
// that reported sent, count messages. It returns the first for the
// caller's own checks.
func finishBrokenThenIntact(t *testing.T, recv *child, sent senderReport, count uint64) connReport {
	t.Helper()
	recv.closed(t, 2)
	recv.finish(t)
	got := recv.receiverReport(t)
	assert.Equal(t, uint64(2), got.Accepted)
	assert.False(t, got.TimedOut)
	require.Len(t, got.Conns, 2)
	broken := got.Conns[0]
	assert.Equal(t, uint64(1), broken.Stream)
	assert.Zero(t, broken.VerifyErrors, "the prefix before the fault, first error: %s", broken.FirstError)
	assertIntact(t, sent, got.Conns[1], 2, count)
	return broken
}

// assertIntact checks that count messages of stream went from a sender,
// which then closed, to a receiver's connection, all reported completed,
// all delivered in order with their content, and that the receiver saw
// the sender close.
func assertIntact(t *testing.T, sent senderReport, got connReport, stream, count uint64) {
	t.Helper()
	assert.Empty(t, sent.SendError)
	assert.Zero(t, sent.Refused, "posts refused")
	assert.False(t, sent.TimedOut, "sender timed out")
	assert.False(t, sent.Closed, "the connection ended before the sender closed it: %s", sent.CloseError)
	assert.Equal(t, count, sent.Sent, "sent")
	assert.Equal(t, count, sent.Completed, "completed")
	assert.Zero(t, sent.Failed, "failed")
	assert.Zero(t, sent.Unexpected, "keys reported twice or never handed over")
	assert.Zero(t, sent.Unreported, "keys never reported")
	assert.Equal(t, count, sent.Stats.Sent, "endpoint's Sent")
	assert.Equal(t, count, sent.Stats.Completed, "endpoint's Completed")
	assert.Equal(t, count*msgSize, sent.Stats.Bytes, "endpoint's Bytes")

	assert.Equal(t, stream, got.Stream, "stream")
	assert.Equal(t, count, got.Messages, "messages received")
	assert.Equal(t, count*msgSize, got.Bytes, "bytes received")
	assert.Zero(t, got.VerifyErrors, "verify errors, first: %s", got.FirstError)
	assert.Zero(t, got.ReceiveErrors, "receive errors, first: %s", got.ReceiveError)
	assert.True(t, got.Closed, "receiver saw the connection close")
	assert.True(t, got.PeerClosed, "closed by the peer, got %q", got.CloseError)
}

// logRate logs a stream's size and speed.
func logRate(t *testing.T, what string, count uint64, took time.Duration) {
	t.Logf("%s: %d × %d B in %v (%.1f MB/s, including process start)", what, count, msgSize,
		took.Round(time.Millisecond), float64(count*msgSize)/took.Seconds()/1e6)
}
