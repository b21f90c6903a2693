package latency

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOneWayQuantile(t *testing.T) {
	assert.Zero(t, OneWayQuantile(nil, 0.5))
	rtts := []time.Duration{2 * time.Microsecond, 4 * time.Microsecond, 6 * time.Microsecond, 100 * time.Microsecond}
	assert.InDelta(t, 3.0, OneWayQuantile(rtts, 0.50), 1e-9, "index 2 of 4, halved")
	assert.InDelta(t, 50.0, OneWayQuantile(rtts, 0.99), 1e-9)
	assert.InDelta(t, 50.0, OneWayQuantile(rtts, 1), 1e-9, "never past the last")
}

func TestOneWayMean(t *testing.T) {
	assert.Zero(t, OneWayMean(nil))
	assert.InDelta(t, 2.0, OneWayMean([]time.Duration{2 * time.Microsecond, 6 * time.Microsecond}), 1e-9)
}
