package coalesce

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/netio-go/netio"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOverhead(t *testing.T) {
	assert.Equal(t, 4, Overhead(0, false))
	assert.Equal(t, 5, Overhead(1, false))
	assert.Equal(t, 12, Overhead(0, true))
	assert.Equal(t, 13, Overhead(255, true))
	assert.Equal(t, MaxOverhead, Overhead(255, true))
}

func TestEncoderWritesTagOnlyWhenItChanges(t *testing.T) {
	e := NewEncoder(make([]byte, 64))
	require.NoError(t, e.Append(7, 0, []byte("a")))
	require.NoError(t, e.Append(7, 0, []byte("b")))
	require.NoError(t, e.Append(8, 0, []byte("c")))

	want := []byte{
		0x01, 0, 0, 0x80, 7, 0, 0, 0, 0, 0, 0, 0, 'a', // first: tag
		0x01, 0, 0, 0x00, 'b', // same tag: none
		0x01, 0, 0, 0x80, 8, 0, 0, 0, 0, 0, 0, 0, 'c', // changed: tag
	}
	assert.Equal(t, want, e.Bytes())
	assert.Equal(t, len(want), e.Len())
	assert.Equal(t, 3, e.Count())
	assert.Equal(t, 64-len(want), e.Remaining())
}

func TestEncoderStatusByteComesBeforeTag(t *testing.T) {
	e := NewEncoder(make([]byte, 32))
	require.NoError(t, e.Append(0x0102030405060708, 9, []byte{0xee}))
	want := []byte{0x01, 0, 0, 0xc0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0xee}
	assert.Equal(t, want, e.Bytes())
}

func TestEncoderResetStartsWithTagAgain(t *testing.T) {
	buf := make([]byte, 32)
	e := NewEncoder(buf)
	require.NoError(t, e.Append(5, 0, []byte("x")))
	e.Reset(buf)
	assert.Zero(t, e.Len())
	assert.Zero(t, e.Count())
	require.NoError(t, e.Append(5, 0, []byte("y")))
	assert.Equal(t, []byte{1, 0, 0, 0x80, 5, 0, 0, 0, 0, 0, 0, 0, 'y'}, e.Bytes())
}

func TestEncoderFirstMessageWithTagZeroCarriesTag(t *testing.T) {
	// The zero tag equals the Encoder's initial tag field: the first message
	// must still carry it, or the buffer would be malformed.
	e := NewEncoder(make([]byte, 16))
	require.NoError(t, e.Append(0, 0, nil))
	assert.Equal(t, []byte{0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0}, e.Bytes())
}

func TestEncoderFullChangesNothing(t *testing.T) {
	buf := bytes.Repeat([]byte{0xaa}, 24)
	e := NewEncoder(buf)
	require.NoError(t, e.Append(1, 0, make([]byte, 8))) // 20 bytes
	before := append([]byte(nil), buf...)

	// 4 bytes left: a header word fits, a one-byte payload does not.
	err := e.Append(1, 0, []byte{1})
	assert.ErrorIs(t, err, ErrFull)
	assert.Equal(t, before, buf, "a failed append must not write")
	assert.Equal(t, 20, e.Len())
	assert.Equal(t, 1, e.Count())

	// An empty payload with the same tag fits exactly.
	require.NoError(t, e.Append(1, 0, nil))
	assert.Equal(t, 24, e.Len())
	assert.Zero(t, e.Remaining())
}

func TestEncoderFullMeansItFitsInAFreshBuffer(t *testing.T) {
	e := NewEncoder(make([]byte, 20))
	require.NoError(t, e.Append(1, 0, []byte("abcd"))) // 16 bytes
	err := e.Append(2, 3, []byte("1234567"))           // needs 13+7
	require.ErrorIs(t, err, ErrFull)
	e.Reset(make([]byte, 20))
	assert.NoError(t, e.Append(2, 3, []byte("1234567")), "ErrFull promises a fresh buffer holds it")
	assert.Equal(t, 20, e.Len())
}

func TestEncoderTooLarge(t *testing.T) {
	cases := []struct {
		name   string
		bufLen int
		status uint8
		n      int
	}{
		{"payload beyond empty buffer", 16, 0, 5},
		{"status byte tips it over", 16, 1, 4},
		{"zero-length buffer", 0, 0, 0},
		{"buffer shorter than a header", 3, 0, 0},
		{"beyond MaxPayload", 16, 0, MaxPayload + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := NewEncoder(make([]byte, c.bufLen))
			_, err := e.Reserve(1, c.status, c.n)
			assert.ErrorIs(t, err, ErrTooLarge)
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			assert.Zero(t, e.Len())
			assert.Zero(t, e.Count())
		})
	}
}

func TestEncoderTooLargeEvenWhenTagWouldBeOmitted(t *testing.T) {
	// Mid-buffer the same tag needs no tag bytes, but a fresh buffer would:
	// the answer must not depend on where in the buffer we are.
	e := NewEncoder(make([]byte, 16))
	require.NoError(t, e.Append(1, 0, nil))
	assert.ErrorIs(t, e.Append(1, 0, make([]byte, 5)), ErrTooLarge)
}

func TestEncoderExactFitInEmptyBuffer(t *testing.T) {
	e := NewEncoder(make([]byte, 13+10))
	require.NoError(t, e.Append(1, 1, make([]byte, 10)))
	assert.Equal(t, 23, e.Len())
}

func TestEncoderNegativeReserve(t *testing.T) {
	e := NewEncoder(make([]byte, 64))
	_, err := e.Reserve(1, 0, -1)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	assert.False(t, errors.Is(err, ErrTooLarge))
	assert.Zero(t, e.Len())
}

func TestEncoderZeroValueHoldsNothing(t *testing.T) {
	var e Encoder
	assert.ErrorIs(t, e.Append(1, 0, nil), ErrTooLarge)
	assert.Empty(t, e.Bytes())
}

func TestReserveReturnsPayloadInPlace(t *testing.T) {
	buf := make([]byte, 64)
	e := NewEncoder(buf)
	dst, err := e.Reserve(3, 0, 4)
	require.NoError(t, err)
	require.Len(t, dst, 4)
	assert.Equal(t, 4, cap(dst), "the payload must not be able to grow into later messages")
	binary.LittleEndian.PutUint32(dst, 0xdeadbeef)
	assert.Equal(t, []byte{0xef, 0xbe, 0xad, 0xde}, buf[12:16])
}

func TestAppendVConcatenatesParts(t *testing.T) {
	e := NewEncoder(make([]byte, 64))
	require.NoError(t, e.AppendV(1, 0, [][]byte{[]byte("he"), nil, []byte("llo")}))
	require.NoError(t, e.AppendV(1, 0, nil))
	var got []string
	require.NoError(t, Decode(e.Bytes(), func(_ uint64, data []byte, _ uint8) {
		got = append(got, string(data))
	}))
	assert.Equal(t, []string{"hello", ""}, got)
}

func TestAppendVErrorsChangeNothing(t *testing.T) {
	e := NewEncoder(make([]byte, 20))
	require.NoError(t, e.Append(1, 0, []byte("ab")))
	assert.ErrorIs(t, e.AppendV(1, 0, [][]byte{[]byte("12"), []byte("345")}), ErrFull)
	assert.ErrorIs(t, e.AppendV(1, 0, [][]byte{make([]byte, 5), make([]byte, 4)}), ErrTooLarge)
	assert.Equal(t, 14, e.Len())
	assert.Equal(t, 1, e.Count())
}

func TestAppendVBeyondMaxPayloadInPieces(t *testing.T) {
	// 1025 views of one MiB: more than MaxPayload in total, with 1 MiB of
	// memory. The sum must be refused, not wrapped into the 30-bit field.
	mib := make([]byte, 1<<20)
	parts := make([][]byte, 1025)
	for i := range parts {
		parts[i] = mib
	}
	e := NewEncoder(make([]byte, 2<<20)) // 2 MiB: holds 1 MiB
	assert.ErrorIs(t, e.AppendV(1, 0, parts), ErrTooLarge)
	assert.ErrorIs(t, e.AppendV(1, 0, parts[:3]), ErrTooLarge, "3 MiB exceeds the 2 MiB buffer")
	assert.NoError(t, e.AppendV(1, 0, parts[:1]))
	assert.Equal(t, Overhead(0, true)+len(mib), e.Len())
}
