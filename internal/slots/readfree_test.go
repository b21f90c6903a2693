package slots_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/slots"
)

// TestReadFree: the free count and the fewest free since the previous
// ReadFree, an interval of its own that NumAvailable does not reset (nor
// ReadFree NumAvailable's).
func TestReadFree(t *testing.T) {
	s := slots.NewSet(4)
	free, least := s.ReadFree()
	assert.Equal(t, [2]int{4, 4}, [2]int{free, least}, "nothing taken")

	a, b, c := take(t, s, alice), take(t, s, alice), take(t, s, alice)
	assert.True(t, s.MarkPosted(c, alice, 7))
	assert.True(t, s.Release(a, alice))
	assert.True(t, s.Release(b, alice))
	assert.Equal(t, 1, s.NumAvailable(), "NumAvailable's interval: fewest free was 1")

	free, least = s.ReadFree()
	assert.Equal(t, 3, free, "one posted")
	assert.Equal(t, 1, least, "NumAvailable did not reset ReadFree's interval")
	free, least = s.ReadFree()
	assert.Equal(t, [2]int{3, 3}, [2]int{free, least}, "a new interval starts at the count now")

	take(t, s, bob)
	take(t, s, bob)
	free, least = s.ReadFree()
	assert.Equal(t, [2]int{1, 1}, [2]int{free, least})
	assert.Equal(t, 1, s.NumAvailable(), "ReadFree did not reset NumAvailable's interval")
}
