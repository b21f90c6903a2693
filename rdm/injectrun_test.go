package rdm_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/rdm"
)

// runLog records the messages of every run of injects an endpoint posts
// (rdm.WrapRunPost), on its poller goroutine.
type runLog struct {
	mu   sync.Mutex
	runs [][]string
}

func (l *runLog) wrap(post rdm.RunPost) rdm.RunPost {
	return func(ep *fabric.Endpoint, mem []byte, off, lens []uint32, dest fabric.Addr) (int, fabric.Errno) {
		run := make([]string, len(off))
		for i := range off {
			run[i] = string(mem[off[i] : off[i]+lens[i]])
		}
		l.mu.Lock()
		l.runs = append(l.runs, run)
		l.mu.Unlock()
		return post(ep, mem, off, lens, dest)
	}
}

func (l *runLog) get() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}

// names returns prefix followed by each number of [from, to) in two digits.
func names(prefix string, from, to int) []string {
	s := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, fmt.Sprintf("%s%02d", prefix, i))
	}
	return s
}

// runPair is a sender on its own domain (whose poller a test blocks; it
// sends zero-copy too) and two receivers of another domain, each sent one buffered message first
// (ofi_rxm connects on it).
type runPair struct {
	tx          *rdm.Endpoint
	a, b        rdm.Peer
	inA, inB    *inbox
	blockPoller func() (release func())
}

func openRunPair(t *testing.T, provider, local string, queue int) runPair {
	t.Helper()
	mgr, other := openDomain(t, provider), openDomain(t, provider)
	inA, inB := &inbox{}, &inbox{}
	rxA := open(t, other, local, rdm.Config{OnData: inA.onData})
	rxB := open(t, other, local, rdm.Config{OnData: inB.onData})
	tx := open(t, mgr, local, rdm.Config{OnData: nop, InjectQueue: queue,
		ZeroCopy: &rdm.ZeroCopyConfig{HeaderCount: 4, OnSendCompleted: func(uint64, netio.Status) {}}})
	send(t, tx, rxA.Addr(), []byte("connect"))
	send(t, tx, rxB.Addr(), []byte("connect"))
	require.Eventually(t, func() bool { return inA.count() == 1 && inB.count() == 1 }, 10*time.Second, time.Millisecond)
	a, err := tx.AddPeer(rxA.Addr())
	require.NoError(t, err)
	b, err := tx.AddPeer(rxB.Addr())
	require.NoError(t, err)
	return runPair{tx: tx, a: a, b: b, inA: inA, inB: inB,
		blockPoller: func() func() { return blockPoller(t, mgr, provider, local) }}
}

// inject queues each message to peer.
func (p runPair) inject(t *testing.T, to rdm.Peer, msgs []string) {
	t.Helper()
	for _, m := range msgs {
		require.Equal(t, netio.OK, p.tx.Inject([]byte(m), to), m)
	}
}

// injectBlocked queues n injects to a while the sender's poller is
// blocked, lets it go and waits until they arrived, once and in order.
func (p runPair) injectBlocked(t *testing.T, n int) {
	t.Helper()
	release := p.blockPoller()
	p.inject(t, p.a, names("a", 0, n))
	release()
	received(t, p.inA, names("a", 0, n))
}

// received waits until in holds want after its first message, and no more.
func received(t *testing.T, in *inbox, want []string) {
	t.Helper()
	require.Eventually(t, func() bool { return in.count() >= len(want)+1 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // a message sent twice would come meanwhile
	in.mu.Lock()
	defer in.mu.Unlock()
	got := make([]string, 0, len(in.msgs))
	for _, m := range in.msgs[1:] {
		got = append(got, string(m))
	}
	assert.Equal(t, want, got, "every message once, in order")
}

// closedClean closes tx once every send is reported and checks that the
// injects' confirm accounting came out even.
func closedClean(t *testing.T, tx *rdm.Endpoint) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := tx.Stats()
		return s.Completed+s.Failed == s.Sent && s.InjectConfirmsHeld == 0
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, tx.Close())
	s := tx.Stats()
	assert.Zero(t, s.Failed)
	assert.Zero(t, s.InjectsUnconfirmed, "every inject taken was confirmed")
}

// TestInjectRunsStopWhereTheRulesSay: of the sends queued while the
// poller is blocked, the leading untracked injects to one peer go out as
// one run, which stops before a buffered or zero-copy send, before an
// inject to another peer and before the inject postInject would track
// (the peer's last queued, and the 33rd untracked in a row); every
// message arrives once, in order, and every inject is confirmed.
func TestInjectRunsStopWhereTheRulesSay(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			rp := openRunPair(t, p.name, p.local, 64)
			var log runLog
			rdm.WrapRunPost(rp.tx, log.wrap, nil)
			release := rp.blockPoller()
			rp.inject(t, rp.a, names("a", 0, 5))
			buf := rp.tx.GetBuffer()
			require.NotNil(t, buf)
			copy(buf.Bytes(), "buffered")
			require.Equal(t, netio.OK, rp.tx.SendBuffer(buf, len("buffered"), rp.a))
			rp.inject(t, rp.a, names("a", 5, 10))
			rp.inject(t, rp.b, names("b", 0, 3))
			rp.inject(t, rp.a, names("a", 10, 15))
			zc := []byte("zero-copy")
			require.Equal(t, netio.OK, rp.tx.SendZeroCopy(zc[:4], zc[4:], 1, rp.a))
			rp.inject(t, rp.a, names("a", 15, 50))
			release()

			wantA := append(append(names("a", 0, 5), "buffered"), names("a", 5, 15)...)
			wantA = append(append(wantA, "zero-copy"), names("a", 15, 50)...)
			received(t, rp.inA, wantA)
			received(t, rp.inB, names("b", 0, 3))
			assert.Equal(t, [][]string{
				names("a", 0, 5),   // stops before the buffered send
				names("a", 5, 10),  // stops before the inject to b
				names("b", 0, 2),   // stops before b's last, tracked
				names("a", 10, 15), // stops before the zero-copy send
				names("a", 15, 32), // 15+17 untracked in a row: a32 is tracked
				names("a", 33, 49), // a49, the last, is tracked or waits for a32's confirm
			}, log.get())
			closedClean(t, rp.tx)
		})
	}
}

// TestInjectRunsStopAtRunMax: of 70 injects queued to one peer, a0-a31
// go as a run and a32 tracked; behind it, in flight, no rule stops a run
// but the hand-off's: a33-a64 go as one run of 32 (sendcore.RunMax).
func TestInjectRunsStopAtRunMax(t *testing.T) {
	p := providers[0]
	rp := openRunPair(t, p.name, p.local, 80)
	var log runLog
	rdm.WrapRunPost(rp.tx, log.wrap, nil)
	rp.injectBlocked(t, 70)
	runs := log.get()
	require.GreaterOrEqual(t, len(runs), 2)
	assert.Equal(t, names("a", 0, 32), runs[0])
	assert.Equal(t, names("a", 33, 65), runs[1])
	closedClean(t, rp.tx)
}

// TestInjectRunRefusedMidRun: a run the provider refuses after two
// injects leaves the refused one to the single post (offered twice, not
// three times), and the next run starts after it; refused at its start,
// that run leaves its first to the single post, which the provider
// refuses once more: that inject is parked, the rest queue behind it in
// the lane, and all arrive once, in order, from the retries; the
// accounting stays even.
func TestInjectRunRefusedMidRun(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			rp := openRunPair(t, p.name, p.local, 64)
			var log runLog
			runs, refusedSingle := 0, ""
			var laneMu sync.Mutex
			lanePosts := map[string]int{}
			rdm.WrapRunPost(rp.tx, func(post rdm.RunPost) rdm.RunPost {
				return log.wrap(func(ep *fabric.Endpoint, mem []byte, off, lens []uint32, dest fabric.Addr) (int, fabric.Errno) {
					runs++ // on the poller goroutine only
					switch runs {
					case 1:
						n, errno := post(ep, mem, off[:2], lens[:2], dest)
						if errno != 0 {
							return n, errno
						}
						return n, fabric.EAGAIN
					case 2:
						return 0, fabric.EAGAIN
					}
					return post(ep, mem, off, lens, dest)
				})
			}, func(post rdm.LanePost) rdm.LanePost {
				return func(ep *fabric.Endpoint, key uint32, n int, to rdm.Peer) fabric.Errno {
					if !rdm.IsInjectKey(key) || runs < 2 {
						return post(ep, key, n, to)
					}
					laneMu.Lock()
					defer laneMu.Unlock()
					lanePosts[fmt.Sprint(key)]++
					if refusedSingle == "" {
						refusedSingle = fmt.Sprint(key)
						return fabric.EAGAIN
					}
					return post(ep, key, n, to)
				}
			})
			rp.injectBlocked(t, 20)
			r := log.get()
			require.GreaterOrEqual(t, len(r), 2)
			assert.Equal(t, names("a", 0, 20)[:len(r[0])], r[0], "the first run")
			assert.Equal(t, names("a", 3, 3+len(r[1])), r[1], "the single post took the refused inject, the second run starts after it")
			laneMu.Lock()
			assert.NotEmpty(t, refusedSingle)
			assert.Equal(t, 2, lanePosts[refusedSingle], "the refused single post is retried once from its lane")
			assert.Len(t, lanePosts, 17, "the rest went out singly")
			laneMu.Unlock()
			closedClean(t, rp.tx)
		})
	}
}
