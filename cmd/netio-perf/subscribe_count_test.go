package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/pubsub"
)

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Without --verify and --stall-after the message callback only counts:
// --count is reached at the end of the buffer that holds the last message,
// and messages reported missed count towards it.
func TestSubTallyCountsPerBuffer(t *testing.T) {
	tl := newSubTally(5, nil, nil)
	on := tl.onMessage()
	for range 3 {
		on(pubsub.Message{Tag: 1, Data: []byte("x")})
	}
	assert.NotZero(t, tl.first.Load(), "first message stamped")
	tl.onBuffer("pub", nil)
	assert.Equal(t, uint64(3), tl.received.Load())
	assert.False(t, isClosed(tl.reached))
	tl.onGap(pubsub.Gap{Tag: 1, First: 3, Count: 1})
	assert.False(t, isClosed(tl.reached), "3 received and 1 missed")
	on(pubsub.Message{Tag: 1})
	assert.False(t, isClosed(tl.reached), "--count is checked per buffer")
	tl.onBuffer("pub", nil)
	assert.True(t, isClosed(tl.reached), "4 received and 1 missed make --count 5")
	assert.Equal(t, uint64(4), tl.received.Load())
	assert.Equal(t, uint64(1), tl.missed.Load())
	assert.GreaterOrEqual(t, tl.last.Load(), tl.first.Load())
	tl.onBuffer("pub", nil) // after --count: no second close
}

// With --verify every message is checked, and --count is reached at the
// message that makes it, before its buffer ends.
func TestSubTallyChecksEachMessage(t *testing.T) {
	pat := verifyPattern(256)
	var stalled []uint64
	tl := newSubTally(3, pat, func(n uint64) { stalled = append(stalled, n) })
	msg := func(seq uint64) []byte {
		b := make([]byte, 64)
		pat.Fill(b, 7, seq)
		return b
	}
	on := tl.onMessage()
	on(pubsub.Message{Tag: 7, Seq: 0, Data: msg(0)})
	on(pubsub.Message{Tag: 7, Seq: 1, Data: msg(0)}) // the bytes of message 0
	assert.Equal(t, uint64(1), tl.verifyErrors.Load())
	assert.False(t, isClosed(tl.reached))
	on(pubsub.Message{Tag: 7, Seq: 2, Data: msg(2)})
	require.True(t, isClosed(tl.reached), "--count reached at the third message")
	assert.Equal(t, uint64(3), tl.received.Load())
	assert.Equal(t, uint64(1), tl.verifyErrors.Load())
	assert.Equal(t, []uint64{1, 2, 3}, stalled, "the staller sees every message's count")
}

// Without --count the tally never reports the end.
func TestSubTallyWithoutCount(t *testing.T) {
	tl := newSubTally(0, nil, nil)
	tl.onMessage()(pubsub.Message{})
	tl.onBuffer("pub", nil)
	assert.False(t, isClosed(tl.reached))
	assert.Equal(t, uint64(1), tl.received.Load())
}

// BenchmarkCountMessage is netio-perf subscribe's own cost per message
// without --verify: the callback the subscriber calls for each one.
func BenchmarkCountMessage(b *testing.B) {
	tl := newSubTally(0, nil, nil)
	on := tl.onMessage()
	m := pubsub.Message{Tag: 1, Data: make([]byte, 64)}
	b.ReportAllocs()
	for range b.N {
		on(m)
	}
	if tl.got != uint64(b.N) {
		b.Fatalf("counted %d of %d", tl.got, b.N)
	}
}
