package main

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPublishReportsSubscribersThatLeft: the publisher's JSON lists every
// subscriber it served, also one that left long before the end (it got
// its --count of a paced run) and one that left right after its last
// message. The report used to read the subscribers served at the end, and
// so missed the first always and the second often.
func TestPublishReportsSubscribersThatLeft(t *testing.T) {
	for _, mode := range []string{"buffered", "shared"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			const total, early = 4000, 500
			args := []string{"--tags", "1", "--size", "64", "--count", "4000", "--rate", "20000", "--subscribers", "2", "--json"}
			if mode == "shared" {
				args = append(args, "--shared")
			}
			pub := startListening(t, ctx, "publish", args...)
			var wg sync.WaitGroup
			for _, count := range []string{"500", "4000"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var out, errOut bytes.Buffer
					code := run(ctx, []string{"subscribe", "--connect", pub.addr, "--tags", "0", "--count", count, "--json"}, &out, &errOut)
					assert.Equal(t, exitOK, code, "subscriber of %s: %s", count, errOut.String())
				}()
			}
			wg.Wait()
			code, last := pub.wait(t, ctx)
			require.Equal(t, exitOK, code)
			var r pubReport
			require.NoError(t, json.Unmarshal([]byte(last), &r), last)
			assert.Positive(t, r.CtxSwitches, "a paced run waits, so its threads leave the CPU")
			require.Len(t, r.Subscribers, 2, "both subscribers, though both left: %s", last)
			got := []uint64{r.Subscribers[0].Delivered, r.Subscribers[1].Delivered}
			if got[0] > got[1] {
				got[0], got[1] = got[1], got[0]
			}
			assert.GreaterOrEqual(t, got[0], uint64(early), "the one that left early took its --count at least")
			assert.Equal(t, uint64(total), got[1], "the other took every message")
			for _, s := range r.Subscribers {
				assert.Equal(t, 1, s.Tags)
				assert.Equal(t, "block", s.Policy)
				assert.NotEmpty(t, s.Peer)
			}
		})
	}
}
