package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// lostKeys names the keys neither delivered nor reported failed, from 1
// to what was handed over, and the sender's report count beside them.
func TestLostKeys(t *testing.T) {
	st := &stream{}
	for _, k := range []uint64{1, 2, 4, 70} {
		st.delivered.add(k)
	}
	st.failed.add(3)
	st.failed.add(4) // delivered and reported failed: not lost
	st.reported.Store(70)
	ls, lost := st.lostKeys(2, 71)
	assert.True(t, lost)
	assert.Equal(t, 2, ls.Stream)
	assert.Equal(t, uint64(70), ls.Reported)
	assert.Equal(t, 71-5, ls.Lost, "keys 5-69 and 71")
	assert.Equal(t, []uint64{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, ls.FirstKeys)

	_, lost = (&stream{}).lostKeys(0, 0)
	assert.False(t, lost, "nothing handed over, nothing lost")
}
