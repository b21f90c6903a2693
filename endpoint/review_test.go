package endpoint_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/sendbuf"
)

// TestBadInputSharedPollers: a cq.Poller not from cq.Open, and one opened
// on another domain, are refused with netio.ErrInvalidArgument by every
// kind, without a panic and without registering anything.
func TestBadInputSharedPollers(t *testing.T) {
	mgr, other := openDomain(t, "tcp"), openDomain(t, "tcp")
	foreign, err := cq.Open(other, cq.Config{})
	require.NoError(t, err)
	defer func() { assert.NoError(t, foreign.Close()) }()
	for name, p := range map[string]*cq.Poller{"zero poller": {}, "poller of another domain": foreign} {
		for kind, open := range dialers(p) {
			assert.ErrorIs(t, open(mgr, "127.0.0.1:1"), netio.ErrInvalidArgument, name+": "+kind)
		}
		assert.Zero(t, mgr.Stats().Registrations, name)
	}
}

// TestBadInputNilBufferSources: sendbuf.Shared(nil) and sendbuf.Pooled(nil)
// name a source and give none; Dial refuses them rather than falling back
// to buffers of the endpoint's own.
func TestBadInputNilBufferSources(t *testing.T) {
	mgr := openDomain(t, "tcp")
	for name, src := range map[string]sendbuf.Source{
		"Shared(nil)": sendbuf.Shared(nil),
		"Pooled(nil)": sendbuf.Pooled(nil),
	} {
		_, err := endpoint.Dial(testCtx(t), mgr, "127.0.0.1:1", endpoint.SendConfig{Buffers: src})
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
	}
}

// TestFailedManagerCloseLeavesSendersRunning: a Manager.Close that cannot
// succeed (a poller is still open) fails at once and leaves the manager
// open: a reconnecting sender between dials keeps going (found in review:
// a Close that waited for EBUSY to clear held the manager closed meanwhile,
// and the sender stopped for good).
func TestFailedManagerCloseLeavesSendersRunning(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	p, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	var stopped atomic.Bool
	r, err := endpoint.DialReconnecting(mgr, "127.0.0.1:1", endpoint.ReconnectConfig{ // nobody listens
		InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond,
		OnConnectionChange: func(_ bool, err error) {
			if errors.Is(err, netio.ErrClosed) {
				stopped.Store(true)
			}
		},
	})
	require.NoError(t, err)
	start := time.Now()
	assert.Error(t, mgr.Close(), "a poller is open")
	assert.Less(t, time.Since(start), domain.CloseWait, "nothing was closing: no wait")
	assert.False(t, mgr.Closed(), "the failed Close left the manager open")
	time.Sleep(20 * time.Millisecond) // dials go on meanwhile
	assert.False(t, stopped.Load(), "the reconnecting sender keeps going")
	_, st := r.Send([]byte("x"))
	assert.Equal(t, netio.OK, st, "Send after a failed Manager.Close")
	assert.NoError(t, r.Close())
	assert.NoError(t, p.Close())
	assert.NoError(t, mgr.Close())
}
