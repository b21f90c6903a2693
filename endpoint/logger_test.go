package endpoint_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// connectionLog runs a connection that carries n messages on a manager
// whose logger writes to the returned buffer, and closes it.
func connectionLog(t *testing.T, n int) string {
	t.Helper()
	var out syncBuffer // coalesce_test.go
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1",
		Logger: zerolog.New(&out).Level(zerolog.DebugLevel)})
	require.NoError(t, err)
	defer func() { assert.NoError(t, mgr.Close()) }()
	r := newReceiver()
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", r.config(netio.ReceiveParams{}))
	require.NoError(t, err)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{})
	require.NoError(t, err)
	for sent := 0; sent < n; {
		if buf := s.GetBuffer(); buf != nil {
			require.Equal(t, netio.OK, s.SendBuffer(buf, 8))
			sent++
		} else {
			time.Sleep(10 * time.Microsecond)
		}
	}
	require.Eventually(t, func() bool { return r.count.Load() == int64(n) }, 30*time.Second, time.Millisecond)
	require.NoError(t, s.Close())
	select {
	case <-r.closed:
	case <-time.After(30 * time.Second):
		require.Fail(t, "the receiver never saw the connection close")
	}
	require.NoError(t, l.Close())
	return out.String()
}

// TestManagerLoggerReachesEveryPart: the manager's logger, given to
// nothing else, receives the listener's, the sender's and the
// connection's messages, with the peer and the reason, and none per
// message.
func TestManagerLoggerReachesEveryPart(t *testing.T) {
	few, many := connectionLog(t, 1), connectionLog(t, 300)
	for _, want := range []string{`"message":"listening"`, `"message":"connected"`, `"message":"connection established"`} {
		assert.Contains(t, few, want)
	}
	var closes []string
	for _, line := range strings.Split(few, "\n") {
		if strings.Contains(line, `"message":"connection closed"`) {
			closes = append(closes, line)
			assert.Contains(t, line, `"peer":"127.0.0.1:`, "a connection event names the peer")
			assert.Contains(t, line, `"error":`, "and the reason")
		}
	}
	assert.Len(t, closes, 2, "the sender's and the receiver's")
	assert.Equal(t, strings.Count(few, "\n"), strings.Count(many, "\n"), "nothing logs per message")
}
