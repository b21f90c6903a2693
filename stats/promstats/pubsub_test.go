package promstats_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/stats"
	"github.com/netio-go/netio/stats/promstats"
)

// fixedSource is a Source whose snapshot is given.
type fixedSource stats.Snapshot

func (f fixedSource) Snapshot() stats.Snapshot { return stats.Snapshot(f) }

// gatherUnlabelled scrapes c and returns the value of every metric whose
// only label is the provider, by name.
func gatherUnlabelled(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != 1 {
				continue
			}
			switch {
			case m.Counter != nil:
				out[f.GetName()] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestSubscriberCountersSummed: every subscriber counter of the snapshot
// is exported, summed over the subscribers, each from its own field
// (distinct values, so that one read from another field shows).
func TestSubscriberCountersSummed(t *testing.T) {
	src := fixedSource{Provider: "tcp", Subscribers: []stats.Subscriber{
		{ID: 1, Messages: 100, Bytes: 6400, Gaps: 2, Missed: 30, Moves: 1, Reconnects: 4},
		{ID: 2, Messages: 200, Bytes: 12800, Gaps: 3, Missed: 50, Moves: 2, Reconnects: 5},
	}}
	got := gatherUnlabelled(t, promstats.New(src))
	for name, want := range map[string]float64{
		"netio_pubsub_received_messages_total": 300,
		"netio_pubsub_received_bytes_total":    19200,
		"netio_pubsub_gaps_total":              5,
		"netio_pubsub_missed_messages_total":   80,
		"netio_pubsub_moves_total":             3,
		"netio_pubsub_reconnects_total":        9,
	} {
		assert.Equal(t, want, got[name], name)
		assert.Contains(t, got, name)
	}
}
