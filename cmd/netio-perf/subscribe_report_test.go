package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// TestSubReportCarriesCounters: the JSON report carries each of the
// subscriber's counters from its own field (distinct values, so that one
// taken from another shows), moves included.
func TestSubReportCarriesCounters(t *testing.T) {
	o := subscribeOptions{tags: []uint64{1, 2, 3}, verify: true}
	o.provider = "tcp"
	o.connect = hostPort{IP: "127.0.0.1", Port: 7000}
	r := newSubReport(o, pubsub.SubscriberStats{Messages: 11, Bytes: 12, Gaps: 13, Missed: 14, Resets: 15, Moves: 16})
	line, err := json.Marshal(r)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(line, &got))
	for key, want := range map[string]float64{"messages": 11, "bytes": 12, "gaps": 13, "missed": 14, "resets": 15, "moves": 16, "tags": 3} {
		assert.Equal(t, want, got[key], key)
	}
	assert.Equal(t, "127.0.0.1:7000", got["publisher"])
	assert.Equal(t, true, got["verify"])
}
