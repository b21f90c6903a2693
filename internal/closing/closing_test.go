package closing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/closing"
)

func TestWaitForWhatIsClosing(t *testing.T) {
	owner, other := new(int), new(int)
	assert.True(t, closing.Wait(owner, 0), "nothing closing")
	closing.Begin(owner)
	closing.Begin(owner)
	closing.Begin(other)
	assert.Equal(t, 2, closing.Pending(owner))
	assert.False(t, closing.Wait(owner, 5*time.Millisecond), "still closing: the bound ends the wait")
	go func() {
		time.Sleep(20 * time.Millisecond)
		closing.End(owner)
		closing.End(owner)
	}()
	assert.True(t, closing.Wait(owner, 10*time.Second))
	assert.Zero(t, closing.Pending(owner))
	assert.Equal(t, 1, closing.Pending(other), "owners are apart")
	closing.End(other)
	assert.Zero(t, closing.Pending(other))
}
