package pubsub_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// zcKeys records the keys OnPublishCompleted reports, and frees the
// slot of the region each one used.
type zcKeys struct {
	mu       sync.Mutex
	statuses map[uint64][]pubsub.Status
	free     chan int
}

func (k *zcKeys) completed(key uint64, st pubsub.Status) {
	k.mu.Lock()
	k.statuses[key] = append(k.statuses[key], st)
	k.mu.Unlock()
	k.free <- int(key % uint64(cap(k.free)))
}

func (k *zcKeys) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.statuses)
}

// TestZeroCopy publishes from a registered region the caller owns, to two
// subscribers (one Block, one Drop), in both providers: they get every
// message exactly (they read it like the other modes), and every key is
// reported once, OK, when both sends completed; only then is its slot of
// the region written again. A third subscriber that goes away mid-run
// makes no key go unreported.
func TestZeroCopy(t *testing.T) {
	const slots, size, perTag = 64, 1024, 1500
	for _, prov := range providers {
		for _, inRegion := range []bool{true, false} {
			name := prov + "/region"
			if !inRegion {
				name = prov + "/go-memory"
			}
			t.Run(name, func(t *testing.T) {
				mgr := openDomain(t, prov)
				var mem []byte
				cfg := pubsub.PublisherConfig{Tags: []uint64{1, 2}, Mode: pubsub.ZeroCopy, MaxInFlight: slots}
				if inRegion {
					reg, err := mgr.AllocRegistered(slots*size, domain.AccessSend)
					require.NoError(t, err)
					t.Cleanup(func() { assert.NoError(t, reg.Close()) }) // after the publisher: cleanups run in reverse
					mem, cfg.ZeroCopyRegion = reg.Bytes(), reg
				} else {
					mem = make([]byte, slots*size)
				}
				keys := &zcKeys{statuses: map[uint64][]pubsub.Status{}, free: make(chan int, slots)}
				for i := range slots {
					keys.free <- i
				}
				cfg.OnPublishCompleted = keys.completed
				p := newPublisher(t, mgr, cfg)
				assert.Equal(t, pubsub.InvalidArgument, p.Publish(1, []byte("copying")))

				var cols []*collector
				var subs []*pubsub.Subscriber
				for _, pol := range []pubsub.Policy{pubsub.Block, pubsub.Drop, pubsub.Block} {
					c := newCollector()
					scfg := c.config(p.Addr())
					scfg.Policy = pol
					s, err := pubsub.NewSubscriber(mgr, scfg)
					require.NoError(t, err)
					require.NoError(t, s.Subscribe(ctxT(t, 10*time.Second), 1, 2))
					cols, subs = append(cols, c), append(subs, s)
				}
				deadline := time.Now().Add(30 * time.Second)
				var published uint64
				for seq := range uint64(perTag) {
					if seq == perTag/2 {
						require.NoError(t, subs[2].Close()) // goes away mid-run
					}
					for _, tag := range []uint64{1, 2} {
						var slot int
						select {
						case slot = <-keys.free:
						case <-time.After(10 * time.Second):
							t.Fatal("no slot came back: a key was not reported")
						}
						key := published*slots + uint64(slot) // unique, and names its slot
						published++
						buf := payload(mem[slot*size:(slot+1)*size], tag, seq)
						for {
							st := p.PublishZeroCopy(tag, 0, buf, key)
							if st == pubsub.OK || st == pubsub.PartiallyFailed {
								break
							}
							require.Equal(t, pubsub.NoResources, st)
							require.True(t, time.Now().Before(deadline), "NoResources until the deadline")
							time.Sleep(50 * time.Microsecond)
						}
					}
				}
				waitFor(t, 10*time.Second, func() bool { return keys.count() == 2*perTag }, "%d keys", 2*perTag)
				keys.mu.Lock()
				for k, sts := range keys.statuses {
					assert.Len(t, sts, 1, "key %d reported %d times", k, len(sts))
					assert.NotEqual(t, pubsub.Failed, sts[0], "key %d: two subscribers stay", k)
				}
				keys.mu.Unlock()
				for i, c := range cols[:2] {
					waitFor(t, 10*time.Second, func() bool {
						for _, tag := range []uint64{1, 2} {
							if st, _ := subs[i].TagStats(tag); st.Messages+st.Missed != perTag {
								return false
							}
						}
						return true
					}, "subscriber %d", i)
					for _, tag := range []uint64{1, 2} {
						missed := checkAccounted(t, c, tag, perTag)
						if i == 0 {
							assert.Zero(t, missed, "the Block subscriber gets everything")
						}
					}
					assert.Empty(t, c.problems())
				}
				require.NoError(t, subs[0].Close())
				require.NoError(t, subs[1].Close())
			})
		}
	}
}
