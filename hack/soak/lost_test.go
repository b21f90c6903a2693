package main

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
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

// lostKeys groups the lost keys into runs, and the timeline tells the
// stream's story around them: when the run was handed over and reported,
// the stream's connection changes, the faults, the accepted connections
// that carried it and, near the lost keys, those that carried nothing,
// earliest first.
func TestLostTimeline(t *testing.T) {
	tr := newTrace()
	tr.start = tr.start.Add(-time.Hour) // every event below lands an hour in
	st := &stream{}
	for k := uint64(1); k <= 6; k++ {
		st.times.handed(tr, k)
		st.times.report(tr, k, netio.OK)
		if k > 3 {
			st.delivered.add(k)
		}
	}
	tr.add(1, "stream 1 connected")
	tr.add(0, "stream 0 connected") // another stream's: left out
	tr.add(everyStream, "fault listener restart")
	carrier := &rconn{id: 7, peer: "127.0.0.1:1", accepted: time.Hour, streams: map[uint64]*carried{1: {first: 4, last: 6, n: 3}}}
	idle := &rconn{id: 8, peer: "127.0.0.1:2", accepted: time.Hour, streams: map[uint64]*carried{}}
	tr.order = append(tr.order, carrier, idle)

	ls, lost := st.lostKeys(1, 6)
	require.True(t, lost)
	assert.Equal(t, []keyRun{{1, 3}}, ls.runs)
	lines := tr.timeline(1, &st.times, ls.runs)
	text := strings.Join(lines, "\n")
	assert.Contains(t, text, "keys 1-3 handed over")
	assert.Contains(t, text, "key 1 reported OK; key 3 reported OK")
	assert.Contains(t, text, "stream 1 connected")
	assert.NotContains(t, text, "stream 0 connected")
	assert.Contains(t, text, "fault listener restart")
	assert.Contains(t, text, "accepted conn 7 from 127.0.0.1:1: carried keys 4-6 (3)")
	assert.Contains(t, text, "accepted conn 8 from 127.0.0.1:2: carried nothing; open at the end")
	assert.True(t, slices.IsSortedFunc(lines, func(a, b string) int {
		x, _ := strconv.ParseFloat(strings.Fields(a)[0][:len(strings.Fields(a)[0])-1], 64)
		y, _ := strconv.ParseFloat(strings.Fields(b)[0][:len(strings.Fields(b)[0])-1], 64)
		return cmp.Compare(x, y)
	}), "earliest first: %q", lines)

	for range 2 * maxTimeline {
		tr.add(1, "stream 1 disconnected")
	}
	lines = tr.timeline(1, &st.times, ls.runs)
	assert.Len(t, lines, maxTimeline+1, "bounded, with a count of what was left out")
	assert.Contains(t, lines[maxTimeline], "more")
}
