package netns

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every message carries a pattern the receiver can verify on its own: an
// 8-byte sequence number, an 8-byte stream number (one per sender), then
// body bytes that depend on both and on their offset, so that a message
// from another stream, a repeated or reordered message, or a shifted or
// corrupted byte is caught.
const (
	patternHeader = 16
	maxMsgSize    = 64 << 10
)

// ramp[i] is byte(i); the body of every message is a slice of it, so that
// fill and check are a copy and a compare.
var ramp = func() []byte {
	b := make([]byte, maxMsgSize+256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// body returns the expected body of message seq of stream, n bytes long:
// byte i of the message (i >= patternHeader) is byte(seq + 31*stream + i).
func body(stream, seq uint64, n int) []byte {
	off := int((seq + 31*stream + patternHeader) % 256)
	return ramp[off : off+n]
}

// fill writes message seq of stream into b.
func fill(b []byte, stream, seq uint64) {
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint64(b[8:], stream)
	copy(b[patternHeader:], body(stream, seq, len(b)-patternHeader))
}

// check verifies that b is message wantSeq of stream, size bytes long.
func check(b []byte, size int, stream, wantSeq uint64) error {
	if len(b) != size {
		return fmt.Errorf("message of %d bytes, want %d", len(b), size)
	}
	seq := binary.LittleEndian.Uint64(b[0:])
	if got := binary.LittleEndian.Uint64(b[8:]); got != stream {
		return fmt.Errorf("message %d of stream %d, want stream %d", seq, got, stream)
	}
	if seq != wantSeq {
		return fmt.Errorf("message %d, want %d (lost, repeated or reordered)", seq, wantSeq)
	}
	want := body(stream, seq, size-patternHeader)
	if got := b[patternHeader:]; !bytes.Equal(got, want) {
		i := patternHeader
		for got[i-patternHeader] == want[i-patternHeader] {
			i++
		}
		return fmt.Errorf("message %d: byte %d is %#x, want %#x", seq, i, b[i], want[i-patternHeader])
	}
	return nil
}

// TestPattern checks that check accepts what fill wrote and catches each
// kind of damage; it needs no root.
func TestPattern(t *testing.T) {
	const size = 4096
	msg := func(stream, seq uint64) []byte {
		b := make([]byte, size)
		fill(b, stream, seq)
		return b
	}
	require.NoError(t, check(msg(3, 7), size, 3, 7))
	require.NoError(t, check(msg(0, 1<<40), size, 0, 1<<40), "large sequence numbers")

	assert.ErrorContains(t, check(msg(3, 7)[:size-1], size, 3, 7), "4095 bytes")
	assert.ErrorContains(t, check(msg(4, 7), size, 3, 7), "stream 4, want stream 3")
	assert.ErrorContains(t, check(msg(3, 8), size, 3, 7), "message 8, want 7")

	flipped := msg(3, 7)
	flipped[1000] ^= 0x40
	assert.ErrorContains(t, check(flipped, size, 3, 7), "byte 1000")

	// A body shifted by one byte, as a misplaced copy would leave it.
	shifted := msg(3, 7)
	copy(shifted[patternHeader:], shifted[patternHeader+1:])
	assert.Error(t, check(shifted, size, 3, 7))

	// Another stream's body under this stream's header.
	swapped := msg(3, 7)
	copy(swapped[patternHeader:], msg(4, 7)[patternHeader:])
	assert.ErrorContains(t, check(swapped, size, 3, 7), "byte 16")
}
