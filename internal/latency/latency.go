// Package latency turns ping-pong round trips into one-way latencies (half
// the round trip, in microseconds), picked the same way by netio-perf and
// the benchmark harness.
package latency

import "time"

// OneWayQuantile returns half the q-quantile (0..1) of sorted round trips,
// in µs: the element at index q×n (the last one at most), 0 for none.
func OneWayQuantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i]) / 2 / float64(time.Microsecond)
}

// OneWayMean returns half the mean round trip, in µs, 0 for none.
func OneWayMean(rtts []time.Duration) float64 {
	if len(rtts) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range rtts {
		sum += d
	}
	return float64(sum) / float64(len(rtts)) / 2 / float64(time.Microsecond)
}
