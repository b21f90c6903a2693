package netns

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// subJSON is the part of netio-perf subscribe's report these tests read.
type subJSON struct {
	Messages     uint64 `json:"messages"`
	Gaps         uint64 `json:"gaps"`
	Missed       uint64 `json:"missed"`
	Resets       uint64 `json:"resets"`
	VerifyErrors uint64 `json:"verify_errors"`
	Churn        *struct {
		Ops                int    `json:"ops"`
		Canceled           int    `json:"canceled"`
		Errors             int    `json:"errors"`
		FirstError         string `json:"first_error"`
		PublishersAfter    int    `json:"publishers_after"`
		SubscribedAfter    int    `json:"subscribed_after"`
		GoroutinesBase     int    `json:"goroutines_base"`
		GoroutinesAfter    int    `json:"goroutines_after"`
		RegistrationsBase  int    `json:"registrations_base"`
		RegistrationsAfter int    `json:"registrations_after"`
		SilentTags         int    `json:"silent_tags"`
		UnsolicitedSettled uint64 `json:"unsolicited_settled"`
	} `json:"churn"`
}

// pubJSON is the part of netio-perf publish's report these tests read.
type pubJSON struct {
	Published uint64 `json:"published"`
	Dropped   uint64 `json:"dropped"`
	Baseline  *struct {
		SubscribeEvents    uint64 `json:"subscribe_events"`
		UnsubscribeEvents  uint64 `json:"unsubscribe_events"`
		GoroutinesIdle     int    `json:"goroutines_idle"`
		GoroutinesAfter    int    `json:"goroutines_after"`
		RegistrationsIdle  int    `json:"registrations_idle"`
		RegistrationsAfter int    `json:"registrations_after"`
	} `json:"baseline"`
}

// startPublisher starts netio-perf publish on host 1, listening on its
// port 7000, and waits for it to listen.
func startPublisher(t *testing.T, tp *topology, bin, provider string, args ...string) *perfProc {
	t.Helper()
	ctx := testContext(t)
	addr := tp.addr(1) + ":7000"
	pp := startPerf(t, ctx, tp, 1, bin, append([]string{"publish", "--provider", provider, "--listen", addr,
		"--verify", "--log", "--json", "--timeout", "75s"}, args...)...)
	select {
	case line := <-pp.lines:
		require.Equal(t, "LISTENING "+addr, line)
	case <-ctx.Done():
		t.Fatal("publisher did not start")
	}
	return pp
}

// report decodes the last line of a process's output into v.
func report(t *testing.T, p *perfProc, what string, v any) {
	t.Helper()
	line := p.last(t)
	require.NoError(t, json.Unmarshal([]byte(line), v), "%s: %q", what, line)
}

// TestPubSubDropStalled: a Drop publisher on host 1 and three subscribers
// on hosts 2-4, of which host 4's stops taking messages for 2 s: every
// subscriber reports each number as received or missed, the misses add up
// to exactly what the publisher dropped, and on tcp they fall on the
// stalled one (the other two get every message unless the machine pauses
// them for longer than their slack). Host 4's TCP receive buffers
// are made small so that its 2 s overflow what stands between it and the
// publisher at these modest rates (on tcp; sockets stages what a stalled
// peer leaves without bound, so it may drop nothing there, and the counts
// must agree all the same).
func TestPubSubDropStalled(t *testing.T) {
	bin := buildPerf(t)
	onEachProvider(t, 4, func(t *testing.T, provider string, tp *topology) {
		// 4 s of 1 KiB messages over 4 tags: 5 MB/s on tcp, 2 MB/s on the
		// slower sockets. The publisher keeps 64 buffers in flight per
		// subscriber, each flushed after 5 ms at most: about 300 ms of
		// traffic, which a subscriber that is not stalled needs to ride
		// out the pauses of a loaded machine without a drop. Its receive
		// buffers outnumber them (sockets livelocks otherwise).
		rate := 5000
		if provider == "sockets" {
			rate = 2000
		}
		count := 4 * rate
		_, err := runScript("exec", tp.name, "4", "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 32768 131072")
		require.NoError(t, err)
		pub := startPublisher(t, tp, bin, provider, "--tags", "4", "--size", "1024", "--count", strconv.Itoa(count),
			"--rate", strconv.Itoa(rate), "--policy", "drop", "--bufs", "64", "--flush-interval", "5ms", "--subscribers", "3")
		ctx := testContext(t)
		var subs []*perfProc
		for h := 2; h <= 4; h++ {
			args := []string{"subscribe", "--provider", provider, "--connect", tp.addr(1) + ":7000", "--tags", "0-3",
				"--count", strconv.Itoa(count), "--bufs", "128", "--verify", "--log", "--json", "--timeout", "75s"}
			if h == 4 {
				args = append(args, "--stall-after", strconv.Itoa(rate/2), "--stall", "2s")
			}
			subs = append(subs, startPerf(t, ctx, tp, h, bin, args...))
		}
		reps := make([]subJSON, len(subs))
		for i, sp := range subs {
			report(t, sp, "subscriber on host "+strconv.Itoa(i+2), &reps[i])
		}
		var pr pubJSON
		report(t, pub, "publisher", &pr)
		assert.Equal(t, uint64(count), pr.Published)
		stalled := reps[2]
		t.Logf("%s: the stalled subscriber received %d and missed %d in %d gaps; the publisher dropped %d",
			provider, stalled.Messages, stalled.Missed, stalled.Gaps, pr.Dropped)
		var missed uint64
		for i, r := range reps {
			assert.Equal(t, uint64(count), r.Messages+r.Missed, "host %d: every number received or missed", i+2)
			assert.Zero(t, r.Resets+r.VerifyErrors, "host %d: %+v", i+2, r)
			missed += r.Missed
		}
		assert.Equal(t, pr.Dropped, missed, "the gaps are exactly the publisher's drops")
		// A subscriber that is not stalled rides out about 300 ms of
		// pauses (see above); a machine loaded past that can make the
		// publisher drop for it too, by the same policy. What must hold
		// is that the drops fall on the stalled one, where the stall
		// overflows its connection (tcp; sockets buffers the 2 s): a
		// policy that dropped for everybody, or held everybody back,
		// fails here.
		for i, r := range reps[:2] {
			if r.Missed > 0 {
				t.Logf("host %d is not stalled but missed %d (a loaded machine)", i+2, r.Missed)
			}
			assert.LessOrEqual(t, r.Gaps, r.Missed, "host %d: a gap misses at least one message", i+2)
		}
		if provider == "tcp" {
			assert.Positive(t, stalled.Missed, "the stall did not overflow the connection: the test tested nothing")
			for i, r := range reps[:2] {
				assert.Less(t, 2*r.Missed, stalled.Missed,
					"host %d is not stalled: it misses far less than the stalled one", i+2)
			}
		}
	})
}

// TestPubSubChurn: a subscriber on host 2 makes 10,000 subscribe and
// unsubscribe operations on 64 tags of a Drop publisher on host 1 that
// publishes on all of them meanwhile, then unsubscribes everything. Every
// operation succeeds (or is a subscribe withdrawn by a concurrent
// unsubscribe), every message delivered carries the number it was counted
// at, every tag subscribed after the churn delivers and none of its
// messages is dropped as Unsolicited (what a silent loss looks like), and
// both processes come back to their baseline: no subscription, no
// session, goroutines and registrations as before.
func TestPubSubChurn(t *testing.T) {
	bin := buildPerf(t)
	const ops = 10000
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		pub := startPublisher(t, tp, bin, provider, "--tags", "64", "--size", "64", "--count", "0",
			"--duration", "60s", "--rate", "20000", "--policy", "drop", "--until-unsubscribed", "--subscribers", "1")
		sub := startPerf(t, testContext(t), tp, 2, bin, "subscribe", "--provider", provider, "--connect", tp.addr(1)+":7000",
			"--tags", "0-63", "--churn", strconv.Itoa(ops), "--verify", "--log", "--json", "--timeout", "75s")
		var sr subJSON
		report(t, sub, "churning subscriber", &sr)
		var pr pubJSON
		report(t, pub, "publisher", &pr)
		require.NotNil(t, sr.Churn, "no churn report")
		c := sr.Churn
		t.Logf("%s: %d operations, %d subscribes withdrawn by a concurrent unsubscribe; %d messages delivered, %d missed, %d dropped",
			provider, c.Ops, c.Canceled, sr.Messages, sr.Missed, pr.Dropped)
		assert.Equal(t, ops, c.Ops)
		assert.Zero(t, c.Errors, "first: %s", c.FirstError)
		assert.Zero(t, c.PublishersAfter+c.SubscribedAfter, "the subscriber still holds a publisher or a tag")
		assert.LessOrEqual(t, c.GoroutinesAfter, c.GoroutinesBase, "the subscriber's goroutines")
		assert.Equal(t, c.RegistrationsBase, c.RegistrationsAfter, "the subscriber's registrations")
		assert.Positive(t, sr.Messages)
		assert.Zero(t, sr.VerifyErrors+sr.Resets)
		// A gap is only ever copies the publisher dropped (a drop for a
		// subscription that ended before its SYNC record went out is not
		// reported: nobody is subscribed to miss it).
		assert.LessOrEqual(t, sr.Missed, pr.Dropped, "gaps reported beyond what the publisher dropped")
		// Lost copies do not show in the counts above: after the churn every
		// tag is subscribed, and each must deliver (a tag the publisher does
		// not send is a silent loss), and then none may be dropped as
		// Unsolicited (one the subscriber does not count).
		assert.Zero(t, c.SilentTags, "tags subscribed after the churn that delivered nothing")
		assert.Zero(t, c.UnsolicitedSettled, "messages dropped as Unsolicited once every tag delivered")

		assert.Positive(t, pr.Published)
		if assert.NotNil(t, pr.Baseline, "no baseline in the publisher's report") {
			b := pr.Baseline
			assert.Positive(t, b.SubscribeEvents)
			assert.Equal(t, b.SubscribeEvents, b.UnsubscribeEvents, "every subscription ended")
			assert.LessOrEqual(t, b.GoroutinesAfter, b.GoroutinesIdle, "the publisher's goroutines")
			assert.Equal(t, b.RegistrationsIdle, b.RegistrationsAfter, "the publisher's registrations")
		}
	})
}
