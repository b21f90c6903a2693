package endpoint_test

import (
	"testing"

	"github.com/netio-go/netio/endpoint"
)

// handOffMixSize gives message k a size the receiver can recompute: every
// third message is large enough for the poller to post it, the others are
// posted by the caller unless a large one is still queued.
func handOffMixSize(k int) int {
	if k%3 == 0 {
		return endpoint.HandOffSize + k%7
	}
	return k % 1000
}

// Small messages sent right behind a large one must not overtake it, though
// the poller goroutine posts the large one and the caller could post the
// small ones at once.
func TestHandOffKeepsOrder(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) { streamChecked(t, prov, 300, endpoint.HandOffSize+64, 8, handOffMixSize) })
	}
}

// The same for zero-copy sends: large ones queued for the poller, small
// ones behind them, every message checked for order and content.
func TestZeroCopyHandOffKeepsOrder(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			streamRegion(t, prov, 300, 2*endpoint.HandOffSize, endpoint.HandOffSize+8, 8, handOffMixSize)
		})
	}
}
