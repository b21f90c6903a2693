package rdm_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/rdm"
)

// TestCloseInCallbackCountsTheMessage: an endpoint that a receive callback
// closes counts the libfabric message it was delivering, the messages
// OnMessage was given from it and its receive error, once each, both in
// its Stats and in its kind's totals of the registry, which folds the
// endpoint's counters while Close runs inside the callback, before the
// callback returns. The callback is OnData; OnMessage at the first of
// three coalesced messages; or OnReceiveError after the one valid message
// of a malformed buffer.
func TestCloseInCallbackCountsTheMessage(t *testing.T) {
	type want struct{ bytes, decoded, errors uint64 }
	cases := []struct {
		via  string
		want want
	}{
		{"OnData", want{bytes: 5}},
		{"OnMessage", want{decoded: 1}},
		{"OnReceiveError", want{decoded: 1, errors: 1}},
	}
	for _, p := range providers {
		for _, c := range cases {
			t.Run(p.name+"/"+c.via, func(t *testing.T) {
				mgr := openDomain(t, p.name) // rx's alone: its kind totals are rx's
				closed := make(chan error, 1)
				var calls atomic.Int64
				closeFirst := func(e *rdm.Endpoint) {
					if calls.Add(1) == 1 {
						closed <- e.Close()
					}
				}
				rx := open(t, mgr, p.local, closingConfig(c.via, closeFirst))
				txCfg := rdm.Config{OnData: nop} // GetBuffer gives none to a coalescing endpoint
				if c.via == "OnMessage" {
					txCfg.Coalesce = &rdm.CoalesceConfig{FlushInterval: time.Hour}
				}
				tx := open(t, openDomain(t, p.name), p.local, txCfg)
				sendForClose(t, tx, rx.Addr(), c.via)
				select {
				case err := <-closed:
					assert.NoError(t, err)
				case <-time.After(10 * time.Second):
					require.FailNow(t, "the callback never ran")
				}
				// The endpoint's own counts are final once the callback
				// has returned.
				require.Eventually(t, func() bool { return rx.Stats().Received == 1 }, 10*time.Second, time.Millisecond)
				st := rx.Stats()
				if c.want.bytes != 0 {
					assert.Equal(t, c.want.bytes, st.ReceivedBytes)
				} else {
					assert.Greater(t, st.ReceivedBytes, uint64(5), "a coalesced buffer's messages and their headers")
				}
				assert.Equal(t, c.want.decoded, st.Decoded)
				assert.Equal(t, c.want.errors, st.ReceiveErrors)
				kinds := mgr.Snapshot().Kinds
				require.Len(t, kinds, 1)
				k := kinds[0]
				assert.Equal(t, "rdm", k.Kind)
				assert.Zero(t, k.Live, "rx closed")
				assert.Equal(t, uint64(1), k.MessagesReceived, "the registry folded rx's final counts")
				assert.Equal(t, st.ReceivedBytes, k.BytesReceived)
				assert.Equal(t, c.want.decoded, k.DecodedMessages)
				assert.Equal(t, c.want.errors, k.ReceiveErrors)
				assert.Equal(t, int64(1), calls.Load(), "nothing delivered after Close")
			})
		}
	}
}

// closingConfig is a receiver's Config whose callback via calls closeFirst.
func closingConfig(via string, closeFirst func(*rdm.Endpoint)) rdm.Config {
	onMessage := func(e *rdm.Endpoint, _ rdm.Peer, _ uint64, _ []byte, _ uint8) { closeFirst(e) }
	switch via {
	case "OnData":
		return rdm.Config{OnData: func(e *rdm.Endpoint, _ rdm.Peer, _ []byte) { closeFirst(e) }}
	case "OnMessage":
		return rdm.Config{OnMessage: onMessage}
	default:
		return rdm.Config{OnMessage: func(*rdm.Endpoint, rdm.Peer, uint64, []byte, uint8) {},
			OnReceiveError: func(e *rdm.Endpoint, _ error) { closeFirst(e) }}
	}
}

// sendForClose sends rx one libfabric message for closingConfig(via): 5
// bytes; three coalesced messages; or one coalesced message and a
// truncated header word after it.
func sendForClose(t *testing.T, tx *rdm.Endpoint, addr, via string) {
	t.Helper()
	switch via {
	case "OnData":
		send(t, tx, addr, []byte("hello"))
	case "OnMessage":
		peer, err := tx.AddPeer(addr)
		require.NoError(t, err)
		for range 3 {
			require.Equal(t, netio.OK, tx.SendMessage(7, []byte("hello"), peer))
		}
		require.Equal(t, netio.OK, tx.Flush(peer))
	default:
		var enc coalesce.Encoder
		raw := make([]byte, 64)
		enc.Reset(raw)
		require.NoError(t, enc.Append(3, 0, []byte("ok")))
		send(t, tx, addr, append(raw[:enc.Len():enc.Len()], 0xff, 0xff))
	}
}
