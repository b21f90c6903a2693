package pubsub_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// TestSendTo: commands go to whoever receives for their tag on the bus (a
// group of its own); a receiver that moves to another address is found
// again; unknown tags and oversize messages are refused; every message
// taken is reported once.
func TestSendTo(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			dir := t.TempDir()
			bus, err := pubsub.OpenDirectory(dir, "commands", pubsub.DirectoryConfig{Rescan: time.Millisecond})
			require.NoError(t, err)
			var mu sync.Mutex
			var got []string
			recvCfg := pubsub.ReceiverConfig{Tags: []uint64{100, 101}, Bus: bus, BusID: "fe1",
				OnMessage: func(m pubsub.Message) {
					mu.Lock()
					got = append(got, fmt.Sprintf("%s@%d", m.Data, m.Tag-100))
					mu.Unlock()
				}}
			r1, err := pubsub.NewReceiver(mgr, "127.0.0.1:0", recvCfg)
			require.NoError(t, err)

			var completed sync.Map
			s, err := pubsub.NewSender(mgr, pubsub.SenderConfig{Bus: bus,
				OnSendCompleted: func(recv string, key uint64, st netio.Status) {
					_, dup := completed.LoadOrStore(fmt.Sprintf("%s/%d", recv, key), st)
					assert.False(t, dup, "key %d of %s reported twice", key, recv)
				}})
			require.NoError(t, err)
			_, st := s.SendTo(100, []byte("start"))
			assert.Equal(t, pubsub.OK, st)
			_, st = s.SendTo(101, []byte("stop"))
			assert.Equal(t, pubsub.OK, st)
			_, st = s.SendTo(999, []byte("nobody"))
			assert.Equal(t, pubsub.NoSubscriptions, st)
			_, st = s.SendTo(100, make([]byte, 64<<10))
			assert.Equal(t, pubsub.InvalidArgument, st)
			waitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }, "2 commands")

			// The front-end restarts elsewhere.
			require.NoError(t, r1.Close())
			recvCfg.BusID = "fe1b"
			r2, err := pubsub.NewReceiver(mgr, "127.0.0.1:0", recvCfg)
			require.NoError(t, err)
			_, st = s.SendTo(100, []byte("again"))
			assert.Equal(t, pubsub.OK, st)
			waitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 }, "the third command")
			mu.Lock()
			assert.Equal(t, []string{"start@0", "stop@1", "again@0"}, got)
			mu.Unlock()
			assert.Equal(t, uint64(0), r2.Stats().Unsolicited)
			require.NoError(t, s.Close())
			n := 0
			completed.Range(func(any, any) bool { n++; return true })
			assert.Equal(t, 3, n, "every message taken is reported")
			_, st = s.SendTo(100, []byte("late"))
			assert.Equal(t, pubsub.Closed, st)
			require.NoError(t, r2.Close())
		})
	}
}
