package poll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// schedPass reads the clock every schedPassCheck rounds only, and passes
// once schedPassEvery has gone by since its last pass, not before.
func TestSchedPassEvery(t *testing.T) {
	now := time.Unix(1000, 0)
	reads := 0
	s := schedPass{now: func() time.Time { reads++; return now }, last: now}
	for iter := uint(1); iter < 10*schedPassCheck; iter++ {
		assert.False(t, s.round(iter), "round %d with the clock still", iter)
	}
	assert.Equal(t, 9, reads, "one clock read per schedPassCheck rounds")
	now = now.Add(schedPassEvery - time.Nanosecond)
	assert.False(t, s.round(schedPassCheck), "just before schedPassEvery")
	now = now.Add(time.Nanosecond)
	assert.False(t, s.round(schedPassCheck+1), "not a round that reads the clock")
	assert.True(t, s.round(2*schedPassCheck), "schedPassEvery after the last pass")
	assert.False(t, s.round(3*schedPassCheck), "the pass starts the count again")
	now = now.Add(schedPassEvery)
	assert.True(t, s.round(4*schedPassCheck), "and passes again after as long")
}
