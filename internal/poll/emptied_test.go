package poll_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/poll"
)

// CQEmptied moves with every read that leaves the completion queue empty,
// also on a poller with nothing to do, so that a connection draining after
// its peer's shutdown (endpoint's drainer waits for it to move) always
// ends.
func TestCQEmptiedMovesOnEmptyReads(t *testing.T) {
	p := openPoller(t, openManager(t), poll.Config{})
	defer func() { assert.NoError(t, p.Close()) }()
	var first uint64
	p.Do(func() { first = p.CQEmptied() })
	eventually(t, func() bool {
		var now uint64
		p.Do(func() { now = p.CQEmptied() })
		return now > first
	}, "a read that left the queue empty after the first look")
	var later uint64
	p.Do(func() { later = p.CQEmptied() })
	assert.Greater(t, later, first)
}
