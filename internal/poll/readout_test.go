package poll_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/poll"
)

// ReadOut reads only on the poller goroutine: there, on an idle poller, it
// reads the queue empty (CQEmptied moves) and reports true; elsewhere it
// reads nothing and reports false, as it does once done holds without a
// read.
func TestReadOutReadsOnlyOnThePollerGoroutine(t *testing.T) {
	p := openPoller(t, openManager(t), poll.Config{})
	defer func() { assert.NoError(t, p.Close()) }()
	never := func() bool { return false }
	assert.False(t, p.ReadOut(never), "off the poller goroutine")

	var before, after uint64
	var ok bool
	p.Do(func() {
		before = p.CQEmptied()
		ok = p.ReadOut(never)
		after = p.CQEmptied()
	})
	assert.True(t, ok, "an idle queue reads empty")
	assert.Equal(t, before+1, after, "the empty read is counted")

	reads := 0
	p.Do(func() {
		before = p.CQEmptied()
		ok = p.ReadOut(func() bool { reads++; return true })
		after = p.CQEmptied()
	})
	assert.True(t, ok)
	assert.Equal(t, 1, reads)
	assert.Equal(t, before, after, "done at once: nothing read")
}
