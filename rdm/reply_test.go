package rdm_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/rdm"
)

// postLog records the sends an endpoint's hand-off posts, by buffer ID, and
// whether each was posted inside the OnData that sent it.
type postLog struct {
	mu       sync.Mutex
	ids      []uint64
	inOnData []bool
	onData   bool // set by the OnData around its SendBuffer (poller goroutine)
}

func (l *postLog) wrap(post sendcore.PostFunc) sendcore.PostFunc {
	return func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
		l.mu.Lock()
		l.ids = append(l.ids, uint64(key))
		l.inOnData = append(l.inOnData, l.onData)
		l.mu.Unlock()
		return post(ep, key, n)
	}
}

func (l *postLog) read() ([]uint64, []bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.ids...), append([]bool(nil), l.inOnData...)
}

// reply sends data back to from from e's OnData, marking the call in log.
func reply(t *testing.T, e *rdm.Endpoint, from rdm.Peer, data []byte, log *postLog) uint64 {
	buf := e.GetBuffer()
	if !assert.NotNil(t, buf) {
		return 0
	}
	copy(buf.Bytes(), data)
	log.mu.Lock()
	log.onData = true
	log.mu.Unlock()
	assert.Equal(t, netio.OK, e.SendBuffer(buf, len(data), from))
	log.mu.Lock()
	log.onData = false
	log.mu.Unlock()
	return buf.ID()
}

// TestReplyFromOnDataIsPostedAtOnce: a send made in OnData, on the poller
// goroutine, is posted before OnData returns instead of through the
// poller's run queue afterwards; but not ahead of a send another goroutine
// queued before it, which goes first.
func TestReplyFromOnDataIsPostedAtOnce(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var log postLog
			hold, held := make(chan struct{}), make(chan struct{}, 1)
			var replies []uint64 // OnData's buffer IDs, poller goroutine until the end
			rx := open(t, mgr, p.local, rdm.Config{OnData: func(e *rdm.Endpoint, from rdm.Peer, data []byte) {
				if string(data) == "hold" {
					held <- struct{}{}
					<-hold // the domain's poller waits here, bounded by the test
				}
				replies = append(replies, reply(t, e, from, []byte("re:"+string(data)), &log))
			}})
			rdm.WrapHandOffPost(rx, log.wrap)
			var in inbox
			tx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			back, err := rx.AddPeer(tx.Addr()) // OnData's from names it
			require.NoError(t, err)
			send(t, tx, rx.Addr(), []byte("ping")) // ofi_rxm connects on the first send
			require.Eventually(t, func() bool { return in.count() == 1 }, 10*time.Second, time.Millisecond)
			ids, during := log.read()
			require.Len(t, ids, 1)
			assert.True(t, during[0], "the reply was posted inside OnData")

			send(t, tx, rx.Addr(), []byte("hold"))
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatal("the hold message did not arrive")
			}
			queued := rx.GetBuffer() // sent from this goroutine while the poller is held: queued
			require.NotNil(t, queued)
			copy(queued.Bytes(), "queued")
			require.Equal(t, netio.OK, rx.SendBuffer(queued, len("queued"), back))
			ids, _ = log.read()
			assert.Len(t, ids, 1, "a send from another goroutine waits for the poller")
			close(hold)
			require.Eventually(t, func() bool { return in.count() == 3 }, 10*time.Second, time.Millisecond)
			ids, during = log.read()
			require.Len(t, ids, 3)
			require.Len(t, replies, 2)
			assert.Equal(t, []uint64{replies[0], queued.ID(), replies[1]}, ids, "the queued send first, then the reply behind it")
			assert.False(t, during[1], "the queued send was posted by the drain")
			in.mu.Lock()
			assert.Equal(t, [][]byte{[]byte("re:ping"), []byte("queued"), []byte("re:hold")}, in.msgs)
			in.mu.Unlock()
		})
	}
}

// TestReplyQueuedWithoutFastGoroutineID: where the goroutine ID is read
// slowly (poll.FastGoroutineID false, here forced), a send from OnData is
// not posted at once but queued for the poller, as every other send: the
// send path does not ask OnPollerGoroutine, a microsecond there.
func TestReplyQueuedWithoutFastGoroutineID(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			mgr := openDomain(t, p.name)
			var log postLog
			rx := open(t, mgr, p.local, rdm.Config{OnData: func(e *rdm.Endpoint, from rdm.Peer, data []byte) {
				reply(t, e, from, []byte("re:"+string(data)), &log)
			}})
			rdm.WrapHandOffPost(rx, log.wrap)
			rdm.SetPostDirect(rx, false)
			var in inbox
			tx := open(t, mgr, p.local, rdm.Config{OnData: in.onData})
			_, err := rx.AddPeer(tx.Addr())
			require.NoError(t, err)
			send(t, tx, rx.Addr(), []byte("ping"))
			require.Eventually(t, func() bool { return in.count() == 1 }, 10*time.Second, time.Millisecond)
			ids, during := log.read()
			require.Len(t, ids, 1)
			assert.False(t, during[0], "the reply was queued, posted after OnData returned")
		})
	}
}
