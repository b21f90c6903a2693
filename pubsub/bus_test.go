package pubsub_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/pubsub"
)

func TestDirectoryBus(t *testing.T) {
	dir := t.TempDir()
	_, err := pubsub.OpenDirectory(dir, "../x", pubsub.DirectoryConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = pubsub.OpenDirectory(dir, "g", pubsub.DirectoryConfig{Heartbeat: time.Second, StaleAfter: time.Second})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)

	d, err := pubsub.OpenDirectory(dir, "daq", pubsub.DirectoryConfig{Rescan: time.Nanosecond})
	require.NoError(t, err)
	_, err = d.Lookup(1)
	assert.ErrorIs(t, err, pubsub.ErrNoPublisher)
	require.NoError(t, d.Announce("ros1", "10.0.0.1:7000", []uint64{3, 1, 2}))
	assert.ErrorIs(t, d.Announce("../evil", "10.0.0.1:7000", nil), netio.ErrInvalidArgument)
	assert.ErrorIs(t, d.Announce("ok", "no-port", nil), netio.ErrBadAddress)

	b, err := os.ReadFile(filepath.Join(dir, "daq", "ros1.json"))
	require.NoError(t, err)
	var e pubsub.DirectoryEntry
	require.NoError(t, json.Unmarshal(b, &e))
	assert.Equal(t, []uint64{1, 2, 3}, e.Tags)
	assert.Equal(t, "10.0.0.1:7000", e.Addr)
	assert.Equal(t, os.Getpid(), e.PID)

	// Another reader of the same directory (another host, say).
	r, err := pubsub.OpenDirectory(dir, "daq", pubsub.DirectoryConfig{Rescan: time.Nanosecond, StaleAfter: 2 * time.Second})
	require.NoError(t, err)
	addr, err := r.Lookup(2)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:7000", addr)

	// Junk is ignored: temporary files, other names, bad JSON, a wrong id.
	g := filepath.Join(dir, "daq")
	require.NoError(t, os.WriteFile(filepath.Join(g, ".ros2.json.tmp-1"), []byte(`{"v":1,"id":"ros2","addr":"1.1.1.1:1","tags":[9]}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(g, "bad.json"), []byte(`{"v":1,`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(g, "liar.json"), []byte(`{"v":1,"id":"other","addr":"1.1.1.1:1","tags":[9]}`), 0o644))
	_, err = r.Lookup(9)
	assert.ErrorIs(t, err, pubsub.ErrNoPublisher)

	// A stale file (a publisher that died without removing it) is ignored.
	require.NoError(t, os.WriteFile(filepath.Join(g, "dead.json"), []byte(`{"v":1,"id":"dead","addr":"1.1.1.1:1","tags":[9],"started":"2020-01-01T00:00:00Z"}`), 0o644))
	addr, err = r.Lookup(9)
	require.NoError(t, err)
	assert.Equal(t, "1.1.1.1:1", addr)
	old := time.Now().Add(-time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(g, "dead.json"), old, old))
	_, err = r.Lookup(9)
	assert.ErrorIs(t, err, pubsub.ErrNoPublisher)

	// The latest started wins a tag both list.
	d2, err := pubsub.OpenDirectory(dir, "daq", pubsub.DirectoryConfig{})
	require.NoError(t, err)
	require.NoError(t, d2.Announce("ros1b", "10.0.0.2:7000", []uint64{3}))
	addr, err = r.Lookup(3)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2:7000", addr)

	es, err := r.Entries()
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, "ros1", es[0].ID)

	require.NoError(t, d2.Withdraw("ros1b"))
	require.NoError(t, d2.Withdraw("ros1b")) // gone already: fine
	addr, err = r.Lookup(3)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1:7000", addr)
	require.NoError(t, d.Withdraw("ros1"))
	_, err = r.Lookup(1)
	assert.ErrorIs(t, err, pubsub.ErrNoPublisher)

	// Publishers announcing through one Directory share its "started":
	// the greater id wins a tag both list, whatever the order written.
	require.NoError(t, d.Announce("ros9", "10.0.0.9:7000", []uint64{7}))
	require.NoError(t, d.Announce("ros0", "10.0.0.8:7000", []uint64{7}))
	es, err = r.Entries()
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, es[0].Started, es[1].Started)
	addr, err = r.Lookup(7)
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.9:7000", addr)
	require.NoError(t, d.Withdraw("ros9"))
	require.NoError(t, d.Withdraw("ros0"))
}

// TestBusSubscribe: subscribers find publishers through a directory bus,
// subscribe to tags of two publishers at once, wait (SubscribeAsync) for a
// publisher that is not there yet, are not held up by the stale file of a
// dead one, and follow a publisher that restarts on another port: under
// the same Numbering, so that they count across the move what they missed.
func TestBusSubscribe(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			dir := t.TempDir()
			pubBus, subBus := fastBus(t, dir), fastBus(t, dir)

			// The stale file of a dead publisher, fresh for now, names an
			// address where nothing listens.
			deadAddr := deadAddress(t)
			require.NoError(t, pubBus.Announce("dead", deadAddr, []uint64{30}))
			pubBus2 := fastBus(t, dir) // so that "dead" is not refreshed

			pA := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{10, 11}, Bus: pubBus2, BusID: "A"})
			aStarted := time.Now()
			pB := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{20}, Bus: pubBus2, BusID: "B", Numbering: "link-20"})

			col := newCollector()
			var subscribedTags atomic.Int64
			scfg := col.config("")
			scfg.Bus = subBus
			scfg.ResolveInterval = 20 * time.Millisecond
			scfg.OnSubscribed = func(_ string, tags []uint64) { subscribedTags.Add(int64(len(tags))) }
			sub := newSubscriber(t, mgr, scfg)

			// Tags of two publishers at once.
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 10, 11, 20))
			assert.ElementsMatch(t, []string{pA.Addr(), pB.Addr()}, sub.Publishers())
			// The dead publisher's tag: Subscribe gives up when ctx ends,
			// it does not hang. The file is refreshed first, until the
			// subscriber's bus sees it: on a loaded machine the set-up
			// above may take longer than StaleAfter.
			waitFor(t, 5*time.Second, func() bool {
				require.NoError(t, pubBus.Announce("dead", deadAddr, []uint64{30}))
				a, _ := subBus.Lookup(30)
				return a == deadAddr
			}, "the subscriber's bus to see the dead file fresh")
			start := time.Now()
			err := sub.Subscribe(ctxT(t, 300*time.Millisecond), 30)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, time.Since(start), 2*time.Second)
			_, ok := sub.TagStats(30)
			assert.False(t, ok, "a failed Subscribe leaves nothing subscribed")

			// Asynchronously: tag 30 is served by a live publisher once the
			// dead one's file is stale, and tag 40 once its publisher starts.
			require.NoError(t, sub.SubscribeAsync(30, 40))
			pC := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{30, 40, 50}, Bus: pubBus2, BusID: "C"})
			waitFor(t, 10*time.Second, func() bool { return len(sub.Subscribed()) == 5 }, "5 tags subscribed")
			assert.Equal(t, int64(5), subscribedTags.Load())

			// A dead publisher's fresh file that outranks the live one
			// (its bus opened later: a later "started"): Subscribe waits
			// on the dead address until the file goes stale and the
			// resolver moves the tag to C, and then succeeds there; it
			// does not fail while the tag ends up subscribed.
			deadBus := fastBus(t, dir)
			waitFor(t, 5*time.Second, func() bool {
				require.NoError(t, deadBus.Announce("dead2", deadAddr, []uint64{50})) // fresh until seen
				a, _ := subBus.Lookup(50)
				return a == deadAddr
			}, "the dead file to outrank C")
			require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 50))
			assert.Contains(t, sub.Subscribed(), uint64(50))
			waitFor(t, 10*time.Second, func() bool { st, _ := pC.TagStats(50); return st.Subscribers == 1 }, "C to have tag 50's subscriber")

			buf := make([]byte, 64)
			deadline := time.Now().Add(10 * time.Second)
			for _, x := range []struct {
				p   *pubsub.Publisher
				tag uint64
			}{{pA, 10}, {pA, 11}, {pB, 20}, {pC, 30}, {pC, 40}, {pC, 50}} {
				for seq := range uint64(50) {
					require.Equal(t, pubsub.OK, publishAll(t, x.p, x.tag, buf, seq, deadline))
				}
			}
			waitFor(t, 10*time.Second, func() bool { return col.count.Load() == 300 }, "300 messages")
			assert.Len(t, col.received(50), 50, "tag 50 delivered from C")

			// Publisher B restarts on another port, continuing its numbering
			// (same Numbering) after 25 messages published while it was down.
			require.NoError(t, pB.Close())
			pB2 := newPublisher(t, mgr, pubsub.PublisherConfig{Tags: []uint64{20}, Bus: pubBus2, BusID: "B2",
				Numbering: "link-20", FirstSequence: func(uint64) uint64 { return 75 }})
			waitFor(t, 10*time.Second, func() bool { st, _ := pB2.TagStats(20); return st.Subscribers == 1 }, "the subscriber to find B again")
			for seq := uint64(75); seq < 100; seq++ {
				require.Equal(t, pubsub.OK, publishAll(t, pB2, 20, buf, seq, deadline))
			}
			waitFor(t, 10*time.Second, func() bool { st, _ := sub.TagStats(20); return st.NextSeq == 100 }, "tag 20 to reach 100")
			assert.Equal(t, uint64(25), checkAccounted(t, col, 20, 100))
			st, _ := sub.TagStats(20)
			assert.Equal(t, uint64(1), st.Moves, "the count went over to B2")
			assert.Empty(t, col.problems())
			assert.NotContains(t, sub.Publishers(), deadAddr)
			// Retries of the dead address backed off: a handful, not a spin.
			assert.Less(t, sub.Stats().ControlFailures, uint64(200))

			// The heartbeat keeps A's file fresh past StaleAfter (400 ms):
			// A is still found; Close removes the file at once.
			if d := 3*400*time.Millisecond - time.Since(aStarted); d > 0 {
				time.Sleep(d)
			}
			addr, err := subBus.Lookup(10)
			require.NoError(t, err, "A's file went stale: no heartbeat")
			assert.Equal(t, pA.Addr(), addr)
			aFile := filepath.Join(subBus.Path(), "A.json")
			require.FileExists(t, aFile)
			require.NoError(t, pA.Close())
			assert.NoFileExists(t, aFile, "Close removes the publisher's file")
			waitFor(t, 5*time.Second, func() bool {
				es, err := subBus.Entries()
				return err == nil && !slices.ContainsFunc(es, func(e pubsub.DirectoryEntry) bool { return e.ID == "A" })
			}, "A to leave the directory's entries")
			_, err = subBus.Lookup(10)
			assert.ErrorIs(t, err, pubsub.ErrNoPublisher)
		})
	}
}
