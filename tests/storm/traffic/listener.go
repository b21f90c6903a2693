package traffic

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// Listener is an endpoint.Listener that counts its connections as they
// come and go.
type Listener struct {
	*endpoint.Listener
	Established atomic.Int64
	Closed      atomic.Int64
	// Unexpected counts connections that ended otherwise than by the
	// peer's orderly shutdown: broken, or closed locally.
	Unexpected atomic.Int64
}

// Listen starts a counting listener on 127.0.0.1 (any free port), closed
// at cleanup unless the test closed it first. OnConnectionEstablished and
// OnConnectionClosed of cfg still run.
func Listen(t testing.TB, mgr *domain.Manager, cfg endpoint.ListenConfig) *Listener {
	t.Helper()
	l := &Listener{}
	established, closed := cfg.OnConnectionEstablished, cfg.OnConnectionClosed
	cfg.OnConnectionEstablished = func(ep *endpoint.ReceiveEndpoint) {
		l.Established.Add(1)
		if established != nil {
			established(ep)
		}
	}
	cfg.OnConnectionClosed = func(ep *endpoint.ReceiveEndpoint, err error) {
		l.Closed.Add(1)
		// The orderly end is the sentinel itself; a broken connection
		// wraps it with the cause.
		if err != netio.ErrConnectionClosed { //nolint:errorlint // see above
			l.Unexpected.Add(1)
		}
		if closed != nil {
			closed(ep, err)
		}
	}
	var err error
	l.Listener, err = endpoint.Listen(mgr, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// Live returns how many accepted connections have not ended.
func (l *Listener) Live() int { return len(l.Connections()) }

// WaitQuiet waits until every accepted connection has ended.
func (l *Listener) WaitQuiet(t testing.TB, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		return l.Live() == 0 && l.Closed.Load() == l.Established.Load()
	}, timeout, 2*time.Millisecond, "connections still open: %d live, %d established, %d closed",
		l.Live(), l.Established.Load(), l.Closed.Load())
}

// WaitSteady waits until the number of live connections has not changed
// for a second (fifty drain periods of a receive endpoint: every teardown
// that is coming has come) and returns it.
func (l *Listener) WaitSteady(t testing.TB, timeout time.Duration) int {
	t.Helper()
	const steadyFor = time.Second
	deadline := time.Now().Add(timeout)
	n, since := l.Live(), time.Now()
	for time.Since(since) < steadyFor {
		require.False(t, time.Now().After(deadline), "live connections never settled (%d)", n)
		time.Sleep(10 * time.Millisecond)
		if m := l.Live(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// EndStale waits until the number of live connections holds steady, then
// closes those still open and returns how many it closed. On sockets these
// are connections whose end the provider never reported (see
// tests/storm): a warm-up may leave one, and a baseline must not hold it.
func (l *Listener) EndStale(t testing.TB, timeout time.Duration) int {
	t.Helper()
	n := l.WaitSteady(t, timeout)
	for _, ep := range l.Connections() {
		assert.NoError(t, ep.Close())
	}
	return n
}
