package rdm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestZeroInjectSizeTracksNothing: a provider with inject_size 0 (shm with
// hmem) gets an inject queue of empty slots, whose pieces are empty, and no
// confirm slots: its injects are never tracked, so nothing indexes memory
// that is not there.
func TestZeroInjectSizeTracksNothing(t *testing.T) {
	var q injects
	q.init(4, 0, 2)
	require.NoError(t, q.ok.init(nil, 2, 8, q.len(), 0)) // no memory to cut: the manager is not used
	for idx := range uint32(4) {
		assert.Empty(t, q.piece(idx, 0))
	}
	assert.Nil(t, q.ok.set)
	assert.False(t, q.tracks(0))
	assert.Empty(t, q.ok.pendingConfirms(nil))
	assert.NoError(t, q.ok.closeConfirms())
}
