package pubsub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

// Subscribing a tag again while its Unsubscribe is still pending (sent
// and not acknowledged, or not sent yet) must not lose what is published
// after the Subscribe returned: it is delivered, or reported as a gap.

// holdUnsubscribeAcks is a control-connection proxy to target that holds
// every acknowledgement of an unsubscribe request for d before passing it
// on, and returns its address. It stops at cleanup.
func holdUnsubscribeAcks(t *testing.T, target string, d time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			var opsMu sync.Mutex
			ops := map[uint64]string{}
			wg.Add(2)
			go func() { // requests: remember each id's op
				defer wg.Done()
				defer u.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					var req pubsub.Request
					_ = json.Unmarshal(line, &req)
					opsMu.Lock()
					ops[req.ID] = req.Op
					opsMu.Unlock()
					if _, err := u.Write(line); err != nil {
						return
					}
				}
			}()
			go func() { // responses: hold those of unsubscribe requests
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(u)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					var resp pubsub.Response
					_ = json.Unmarshal(line, &resp)
					opsMu.Lock()
					op := ops[resp.ID]
					opsMu.Unlock()
					if op == pubsub.OpUnsubscribe {
						time.Sleep(d)
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// accounted reports whether every message of tag numbered from first to
// last (inclusive) was received or reported in a gap.
func (c *collector) accounted(tag, first, last uint64) bool {
	seen := map[uint64]bool{}
	for _, s := range c.received(tag) {
		seen[s] = true
	}
	for _, g := range c.gapList() {
		if g.Tag != tag || g.Reset {
			continue
		}
		for s := g.First; s < g.First+g.Count; s++ {
			seen[s] = true
		}
	}
	for s := first; s <= last; s++ {
		if !seen[s] {
			return false
		}
	}
	return true
}

// TestSubscribeDuringUnsubscribeAck: Subscribe of a tag whose unsubscribe
// request is out and not yet acknowledged returns only once the tag is
// subscribed again, so the message published next is delivered.
func TestSubscribeDuringUnsubscribeAck(t *testing.T) {
	const keep, tag = 1, 5
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{keep, tag}, Policy: pubsub.Block})
	col := newCollector()
	sub := newSubscriber(t, mgr, col.config(holdUnsubscribeAcks(t, p.Addr(), 300*time.Millisecond)))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), keep, tag))
	buf := make([]byte, 64)
	dl := time.Now().Add(10 * time.Second)
	require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, 0, dl))
	waitFor(t, 5*time.Second, func() bool { return col.count.Load() == 1 }, "message 0")

	unsubDone := make(chan error, 1)
	go func() { unsubDone <- sub.Unsubscribe(ctxT(t, 10*time.Second), tag) }()
	waitFor(t, 5*time.Second, func() bool { st, _ := p.TagStats(tag); return st.Subscribers == 0 },
		"the publisher to end the subscription")
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag))
	assert.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, 1, dl), "published after Subscribe returned")
	require.NoError(t, <-unsubDone)
	waitFor(t, 10*time.Second, func() bool { return col.accounted(tag, 1, 1) }, "message 1 delivered or reported")
	assert.Equal(t, []uint64{0, 1}, col.received(tag))
}

// TestSubscribeAfterUnsentUnsubscribe: an Unsubscribe whose request is
// not sent yet (its context had ended) followed by a Subscribe of the
// same tag: every message published after the Subscribe is delivered.
func TestSubscribeAfterUnsentUnsubscribe(t *testing.T) {
	const keep, tag, rounds, perRound = 1, 5, 20, 10
	mgr := openDomain(t, "tcp")
	p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{keep, tag}, Policy: pubsub.Block})
	col := newCollector()
	sub := newSubscriber(t, mgr, col.config(p.Addr()))
	require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), keep, tag))
	buf := make([]byte, 64)
	dl := time.Now().Add(30 * time.Second)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	seq := uint64(0)
	for round := range rounds {
		_ = sub.Unsubscribe(ended, tag) // returns at once; the request may not be out yet
		require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag))
		first := seq
		for range perRound {
			require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, seq, dl))
			seq++
		}
		waitFor(t, 10*time.Second, func() bool { return col.accounted(tag, first, seq-1) },
			"round %d: messages %d to %d delivered or reported (got %v)", round, first, seq-1, col.received(tag))
	}
	assert.Zero(t, sub.Stats().Missed, "Block: nothing is dropped")
}

// TestResubscribeRaceAccountsEveryMessage: Unsubscribe and Subscribe of
// one tag race from two goroutines; once the tag is subscribed, N
// messages published are each received or counted missed: received +
// missed == N, every round.
func TestResubscribeRaceAccountsEveryMessage(t *testing.T) {
	const keep, tag, n = 1, 9, 20
	rounds := 100
	if testing.Short() {
		rounds = 30
	}
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			p := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{keep, tag}, Policy: pubsub.Block})
			col := newCollector()
			sub := newSubscriber(t, mgr, col.config(p.Addr()))
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), keep, tag))
			buf := make([]byte, 48)
			dl := time.Now().Add(60 * time.Second)
			rng := rand.New(rand.NewPCG(19, 5))
			for round := range rounds {
				// The Unsubscribe's context ends at once, soon, or not at all:
				// its request goes out before, during or after the Subscribe's.
				var uctx context.Context
				switch rng.IntN(3) {
				case 0:
					c, cancel := context.WithCancel(context.Background())
					cancel()
					uctx = c
				case 1:
					uctx = ctxT(t, time.Duration(rng.IntN(500))*time.Microsecond)
				default:
					uctx = ctxT(t, 10*time.Second)
				}
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := sub.Unsubscribe(uctx, tag)
					if err != nil && !errors.Is(err, context.Canceled) {
						assert.ErrorIs(t, err, context.DeadlineExceeded, "its context ended, nothing else")
					}
				}()
				if err := sub.Subscribe(ctxT(t, 10*time.Second), tag); err != nil {
					assert.ErrorIs(t, err, netio.ErrCanceled, "withdrawn by the racing Unsubscribe")
				}
				wg.Wait()
				require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), tag)) // subscribed, whoever won
				st, _ := p.TagStats(tag)
				first := st.NextSeq
				for s := first; s < first+n; s++ {
					require.Equal(t, pubsub.OK, publishAll(t, p, tag, buf, s, dl), "round %d seq %d", round, s)
				}
				waitFor(t, 10*time.Second, func() bool { return col.accounted(tag, first, first+n-1) },
					"round %d: received + missed == %d for messages %d..%d", round, n, first, first+n-1)
			}
			ss := sub.Stats()
			assert.Zero(t, ss.Missed, "Block: nothing is dropped")
			assert.Zero(t, ss.OutOfSequence)
			assert.Empty(t, col.problems())
		})
	}
}
