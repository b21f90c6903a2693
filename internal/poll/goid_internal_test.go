package poll

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGoroutineIDs: goid's fast read agrees with the stack's header on this
// build (a Go release it does not know would fall back to the stack, which
// works but costs a microsecond per OnPollerGoroutine: update goid then),
// and every goroutine gets its own ID.
func TestGoroutineIDs(t *testing.T) {
	assert.True(t, FastGoroutineID(), "goid.Get disagrees with runtime.Stack: update github.com/petermattis/goid")
	assert.Equal(t, stackGoroutineID(), goroutineID())
	ids := make(chan uint64)
	for range 8 {
		go func() { ids <- goroutineID() }()
	}
	seen := map[uint64]bool{goroutineID(): true}
	for range 8 {
		id := <-ids
		assert.False(t, seen[id], "goroutine ID %d twice", id)
		seen[id] = true
	}
}

// BenchmarkGoroutineID: the cost of OnPollerGoroutine's question, asked on
// every send a poller's callback makes.
func BenchmarkGoroutineID(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		_ = goroutineID()
	}
}
