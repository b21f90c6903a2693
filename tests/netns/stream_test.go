package netns

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStream streams 20000 verified messages of 4 KiB between two hosts
// on each provider.
func TestStream(t *testing.T) {
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		run := streamRun{provider: provider, count: 20000}
		took := run.run(t, tp)
		logRate(t, provider, run.count, took)
	})
}

// TestImpairedLink streams across links that lose packets: netem's delay
// and random loss, a rate-limited link whose queue overflows, and, where
// the kernel has no netem, random loss in the switch behind a 5 ms switch
// buffer (testLossyLink). TCP underneath both providers must make the
// stream arrive intact, and packets must have been dropped, or the fault
// was never there.
func TestImpairedLink(t *testing.T) {
	impairments := []struct {
		name  string
		qdisc []string
	}{
		{"netem", []string{"netem", "delay", "5ms", "loss", "1%"}},
		{"tbf", []string{"tbf", "rate", "40mbit", "burst", "16kb", "limit", "30kb"}},
	}
	for _, imp := range impairments {
		t.Run(imp.name, func(t *testing.T) {
			onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
				// Both directions: data one way, acknowledgements the other.
				tp.setQdisc(t, 1, imp.qdisc...)
				tp.setQdisc(t, 2, imp.qdisc...)
				run := streamRun{provider: provider, count: 2000}
				took := run.run(t, tp)
				drops := tp.qdiscDrops(t, 1) + tp.qdiscDrops(t, 2)
				assert.Positive(t, drops, "the qdiscs dropped no packet")
				logRate(t, imp.name+"/"+provider, run.count, took)
				t.Logf("packets dropped: %d", drops)
			})
		})
	}
	t.Run("loss", testLossyLink)
}

// TestLinkFlap pulls the sender's cable for a second mid-stream, shorter
// than TCP takes to give up: the stream stalls, resumes when the link is
// back, and arrives intact; nobody sees the connection close early.
func TestLinkFlap(t *testing.T) {
	const down = time.Second
	onEachProvider(t, 2, func(t *testing.T, provider string, tp *topology) {
		run := streamRun{provider: provider, count: 4000, midway: func(t *testing.T) {
			tp.setLink(t, 2, false)
			time.Sleep(down)
			tp.setLink(t, 2, true)
		}}
		took := run.run(t, tp)
		logRate(t, provider+" with the link down for "+down.String(), run.count, took)
	})
}
