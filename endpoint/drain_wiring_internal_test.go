package endpoint

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// An accepted connection's drain peeks on sockets and only there
// (quirks.Quirks.PeekBuffered). The first build took the provider from the
// connection request's fi_info, which names none, and so never peeked:
// the drainer tests with a stand-in peek could not see that.
func TestDrainPeeksOnlyWhereTheProviderHoldsMessages(t *testing.T) {
	for _, prov := range []string{"tcp", "sockets"} {
		t.Run(prov, func(t *testing.T) {
			mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
			established, closed := make(chan *ReceiveEndpoint, 1), make(chan *ReceiveEndpoint, 1)
			l, err := Listen(mgr, "127.0.0.1:0", ListenConfig{
				OnData:                  func(*ReceiveEndpoint, []byte) {},
				OnConnectionEstablished: func(r *ReceiveEndpoint) { established <- r },
				OnConnectionClosed:      func(r *ReceiveEndpoint, _ error) { closed <- r },
			})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, l.Close()) })
			s, err := Dial(context.Background(), mgr, l.Addr(), SendConfig{OnSendCompleted: func(uint64, netio.Status) {}})
			require.NoError(t, err)
			var r *ReceiveEndpoint
			select {
			case r = <-established:
			case <-time.After(10 * time.Second):
				require.Fail(t, "the connection was never established")
			}
			require.NoError(t, s.Close())
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				require.Fail(t, "the peer's close never ended the connection")
			}
			var on, peeks bool
			l.poller.Do(func() { on, peeks = r.drain.on, r.drain.peek != nil })
			assert.True(t, on, "the peer's close was drained")
			assert.Equal(t, prov == "sockets", peeks, "peeks only where the provider holds messages")
		})
	}
}
