package sendcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReportQueue(t *testing.T) {
	q := reports{ring: make([]report, 2)}
	require.True(t, q.reserve())
	require.True(t, q.reserve())
	assert.False(t, q.reserve(), "two places, both reserved")
	q.unreserve()
	assert.True(t, q.reserve(), "an unreserved place is free again")

	assert.True(t, q.push(report{1, 10}), "the first push schedules the report")
	assert.False(t, q.push(report{2, 20}), "a report is due already")
	assert.False(t, q.reserve(), "full")

	got := q.takeAll(nil)
	assert.Equal(t, []report{{1, 10}, {2, 20}}, got, "in the order pushed")
	assert.Empty(t, q.takeAll(nil))

	require.True(t, q.reserve())
	assert.True(t, q.push(report{3, 30}), "takeAll ended the report: the next push schedules one")
	require.True(t, q.reserve())
	assert.False(t, q.push(report{4, 40}))
	assert.Equal(t, []report{{3, 30}, {4, 40}}, q.takeAll(got[:0]), "across the ring's end")
	assert.Zero(t, q.used.Load())
}
