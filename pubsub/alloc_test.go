package pubsub_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// TestPublishDoesNotAllocate: a message published to one subscriber
// costs no allocation in steady state, in every mode: the whole process
// is counted (testing.AllocsPerRun reads the runtime's total), so the
// publisher's completions and the subscriber's receive path are in it
// too. NoResources (a Block subscriber's connection full) is retried
// inside the measured call after a yield, which allocates nothing
// itself; the buffers are large enough that it is rare.
func TestPublishDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const runs, size = 2000, 64
	for _, prov := range providers {
		for _, mode := range []pubsub.Mode{pubsub.Buffered, pubsub.Immediate, pubsub.Shared, pubsub.ZeroCopy} {
			t.Run(fmt.Sprintf("%s/mode%d", prov, mode), func(t *testing.T) {
				mgr := openDomain(t, prov)
				cfg := pubsub.PublisherConfig{Tags: []uint64{1}, Mode: mode,
					Send: netio.BufferedSendParams{BufferSize: 64 << 10, BufferCount: 64}, MaxInFlight: 256}
				buf := make([]byte, size)
				if mode == pubsub.ZeroCopy {
					reg, err := mgr.AllocRegistered(size, domain.AccessSend)
					require.NoError(t, err)
					t.Cleanup(func() { assert.NoError(t, reg.Close()) })
					cfg.ZeroCopyRegion, buf = reg, reg.Bytes()
				}
				p := newPublisher(t, mgr, cfg)
				var got atomic.Int64
				sub := newSubscriber(t, mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(p.Addr()),
					Receive:   netio.ReceiveParams{BufferSize: 64 << 10, BufferCount: 64},
					OnMessage: func(pubsub.Message) { got.Add(1) }})
				require.NoError(t, sub.Subscribe(ctxT(t, 10*time.Second), 1))

				var bad pubsub.Status
				publish := func() {
					for {
						var st pubsub.Status
						if mode == pubsub.ZeroCopy {
							st = p.PublishZeroCopy(1, 0, buf, 1)
						} else {
							st = p.Publish(1, buf)
						}
						switch st {
						case pubsub.NoResources:
							runtime.Gosched()
							continue
						case pubsub.OK:
						default:
							bad = st
						}
						return
					}
				}
				for range runs { // warm up: buffers taken, maps grown
					publish()
				}
				waitFor(t, 10*time.Second, func() bool { return got.Load() == runs }, "the warm-up's %d messages", runs)
				allocs := testing.AllocsPerRun(runs, publish)
				require.Zero(t, bad, "a Publish answered other than OK or NoResources")
				assert.Zero(t, allocs, "allocations per Publish")
				waitFor(t, 10*time.Second, func() bool { return got.Load() == 2*runs+1 }, "every message delivered")
			})
		}
	}
}
