package sendcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHandOffRing(t *testing.T) {
	var h handOff
	h.init(2)
	const a, b, c = 7, 8, 9
	assert.False(t, h.busy())

	queued, schedule := h.push(a, 1)
	assert.True(t, queued)
	assert.True(t, schedule, "the first push schedules a drain")
	queued, schedule = h.push(b, 2)
	assert.True(t, queued)
	assert.False(t, schedule, "a drain is due already")
	queued, _ = h.push(c, 3)
	assert.False(t, queued, "the ring holds two")
	assert.True(t, h.busy())

	q, ok := h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{a, 1}, q)
	q, _ = h.peek()
	assert.Equal(t, queuedSend{a, 1}, q, "peek leaves the send queued until pop")
	h.pop()
	q, ok = h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{b, 2}, q)
	queued, schedule = h.push(c, 3) // wraps around the ring's end
	assert.True(t, queued)
	assert.False(t, schedule, "still draining")
	h.pop()
	q, _ = h.peek()
	assert.Equal(t, queuedSend{c, 3}, q)
	h.pop()

	_, ok = h.peek()
	assert.False(t, ok)
	assert.False(t, h.busy())
	_, schedule = h.push(a, 1)
	assert.True(t, schedule, "an empty peek ended the drain: the next push schedules one")

	h.reset()
	assert.False(t, h.busy())
	_, ok = h.peek()
	assert.False(t, ok)
	assert.Equal(t, make([]queuedSend, 2), h.ring, "reset lets go of the buffers")
}

func TestHandOffRunWrapsAround(t *testing.T) {
	var h handOff
	h.init(4)
	for k := range uint32(3) {
		queued, _ := h.push(k, int(k)+10)
		require.True(t, queued)
	}
	h.popRun(2) // head at 2, one queued
	for k := uint32(3); k < 6; k++ {
		queued, _ := h.push(k, int(k)+10)
		require.True(t, queued)
	}
	keys, ns := make([]uint32, 8), make([]int, 8)
	n := h.peekRun(keys, ns)
	assert.Equal(t, 4, n, "every queued send, across the ring's end")
	assert.Equal(t, []uint32{2, 3, 4, 5}, keys[:n])
	assert.Equal(t, []int{12, 13, 14, 15}, ns[:n])
	assert.Equal(t, 2, h.peekRun(keys[:2], ns), "no more than keys holds")

	h.popRun(3)
	q, ok := h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{5, 15}, q, "popRun removes the oldest, across the ring's end")
	h.popRun(5)
	assert.False(t, h.busy(), "popRun removes no more than is queued")
	_, ok = h.peek()
	assert.False(t, ok)
}
