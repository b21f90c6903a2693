package rdm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestInjectWaitEstimate: a wait in which the poller posted moves the
// estimate a quarter of the way to the measured time per inject; one in
// which it posted nothing doubles it, up to injectWaitMax.
func TestInjectWaitEstimate(t *testing.T) {
	var q injects
	q.measure(64, 32, 64*time.Microsecond, time.Microsecond) // 2 µs an inject
	assert.Equal(t, int64(1250*time.Nanosecond), q.perMsg.Load())
	q.measure(64, 64, time.Millisecond, 3*time.Microsecond)
	assert.Equal(t, int64(6*time.Microsecond), q.perMsg.Load(), "nothing posted: twice as long")
	q.measure(64, 70, time.Millisecond, 800*time.Microsecond)
	assert.Equal(t, int64(injectWaitMax), q.perMsg.Load(), "at most injectWaitMax")
}
