package sendcore

import (
	"testing"

	"github.com/netio-go/netio/fabric"

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
	n := h.peekRun(keys, ns, joinAll{})
	assert.Equal(t, 4, n, "every queued send, across the ring's end")
	assert.Equal(t, []uint32{2, 3, 4, 5}, keys[:n])
	assert.Equal(t, []int{12, 13, 14, 15}, ns[:n])
	assert.Equal(t, 2, h.peekRun(keys[:2], ns, joinAll{}), "no more than keys holds")
	assert.Equal(t, 2, h.peekRun(keys, ns, joinBelow(4)), "no further than the sends join")
	assert.Equal(t, []uint32{2, 3}, keys[:2])
	_, run, _ := h.peekFor(joinBelow(4))
	assert.True(t, run, "the oldest two join")
	_, run, _ = h.peekFor(joinBelow(3))
	assert.False(t, run, "the oldest two do not join")
	_, run, _ = h.peekFor(nil)
	assert.False(t, run, "no runner: no run")

	h.popRun(3)
	q, ok := h.peek()
	require.True(t, ok)
	assert.Equal(t, queuedSend{5, 15}, q, "popRun removes the oldest, across the ring's end")
	h.popRun(5)
	assert.False(t, h.busy(), "popRun removes no more than is queued")
	_, ok = h.peek()
	assert.False(t, ok)
}

// joinAll is a RunPoster whose sends all join, posting nothing.
type joinAll struct{}

func (joinAll) PostRun(*fabric.Endpoint, []uint32, []int) (int, fabric.Errno) { return 0, 0 }
func (joinAll) Joins(uint32, uint32) bool                                     { return true }

// joinBelow is a RunPoster whose sends with keys below it join.
type joinBelow uint32

func (joinBelow) PostRun(*fabric.Endpoint, []uint32, []int) (int, fabric.Errno) { return 0, 0 }
func (j joinBelow) Joins(prev, next uint32) bool                                { return prev < uint32(j) && next < uint32(j) }
