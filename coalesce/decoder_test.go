package coalesce

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// msg is one decoded message, for comparing what came out.
type msg struct {
	Tag    uint64
	Status uint8
	Data   string
}

// decodeAll returns the messages Decode delivered and its error.
func decodeAll(buf []byte) ([]msg, error) {
	var got []msg
	err := Decode(buf, func(tag uint64, data []byte, status uint8) {
		got = append(got, msg{tag, status, string(data)})
	})
	return got, err
}

// concat joins byte slices into a fresh one.
func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// validOne is a well-formed one-message buffer: tag 1, payload "ok".
var validOne = []byte{2, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 'o', 'k'}

func TestDecodeEmptyBufferHoldsNoMessages(t *testing.T) {
	for _, buf := range [][]byte{nil, {}} {
		got, err := decodeAll(buf)
		assert.NoError(t, err)
		assert.Empty(t, got)
		n, err := Validate(buf)
		assert.NoError(t, err)
		assert.Zero(t, n)
	}
}

func TestDecodeMalformed(t *testing.T) {
	cases := []struct {
		name      string
		buf       []byte
		offset    int
		delivered int
		reason    string
	}{
		{"short header word", []byte{1, 0, 0}, 0, 0, "truncated header word: 3 of 4 bytes"},
		{"trailing byte", concat(validOne, []byte{0}), 14, 1, "truncated header word: 1 of 4 bytes"},
		{"status missing", concat(validOne, []byte{0, 0, 0, 0x40}), 14, 1, "truncated status: header word ends the buffer"},
		{"tag missing", []byte{0, 0, 0, 0x80, 1, 2, 3}, 0, 0, "truncated tag: 3 of 8 bytes"},
		{"tag missing after status", []byte{0, 0, 0, 0xc0, 5, 1, 2, 3, 4, 5, 6, 7}, 0, 0, "truncated tag: 7 of 8 bytes"},
		{"first message without tag", []byte{0, 0, 0, 0}, 0, 0, "first message has no tag"},
		{"first message with status, no tag", []byte{1, 0, 0, 0x40, 3, 'x'}, 0, 0, "first message has no tag"},
		{"payload beyond end", concat([]byte{5, 0, 0, 0x80}, make([]byte, 8), []byte("ab")), 0, 0,
			"payload of 5 bytes exceeds the 2 bytes left"},
		{"largest size field", concat(validOne, []byte{0xff, 0xff, 0xff, 0x3f}), 14, 1,
			"payload of 1073741823 bytes exceeds the 0 bytes left"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeAll(c.buf)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrMalformed)
			var me *MalformedError
			require.True(t, errors.As(err, &me))
			assert.Equal(t, c.offset, me.Offset)
			assert.Equal(t, c.delivered, me.Index)
			assert.Equal(t, c.reason, me.Reason)
			assert.Contains(t, err.Error(), c.reason)
			assert.Len(t, got, c.delivered, "only the valid prefix is delivered")

			n, verr := Validate(c.buf)
			assert.Equal(t, err, verr)
			assert.Equal(t, c.delivered, n)
		})
	}
}

func TestMalformedErrorText(t *testing.T) {
	err := &MalformedError{Offset: 14, Index: 1, Reason: "truncated status"}
	assert.Equal(t, "coalesce: malformed buffer: message 1 at offset 14: truncated status", err.Error())
}

func TestDecodeAcceptsNonCanonicalEncodings(t *testing.T) {
	// Our encoder never writes these, but the format allows them: a status
	// flag with status 0, and a tag repeated unchanged.
	buf := concat(
		[]byte{1, 0, 0, 0xc0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 'a'},
		[]byte{1, 0, 0, 0x80, 9, 0, 0, 0, 0, 0, 0, 0, 'b'},
	)
	got, err := decodeAll(buf)
	require.NoError(t, err)
	assert.Equal(t, []msg{{9, 0, "a"}, {9, 0, "b"}}, got)
}

func TestDecoderIteratesAndStopsAtError(t *testing.T) {
	buf := concat(validOne, []byte{3, 0, 0, 0x40, 7, 'x', 'y', 'z'}, []byte{1, 0})
	d := NewDecoder(buf)

	require.True(t, d.Next())
	assert.Equal(t, uint64(1), d.Tag())
	assert.Equal(t, uint8(0), d.Status())
	assert.Equal(t, []byte("ok"), d.Data())

	require.True(t, d.Next())
	assert.Equal(t, uint64(1), d.Tag(), "the tag carries over")
	assert.Equal(t, uint8(7), d.Status())
	assert.Equal(t, []byte("xyz"), d.Data())
	assert.Equal(t, 3, cap(d.Data()), "a payload must not be able to grow into the next message")
	assert.Equal(t, 2, d.Count())
	assert.NoError(t, d.Err())

	assert.False(t, d.Next())
	assert.Nil(t, d.Data())
	assert.ErrorIs(t, d.Err(), ErrMalformed)
	assert.False(t, d.Next(), "a decoder stays stopped after an error")
	assert.Equal(t, 2, d.Count())

	d.Reset(validOne)
	assert.NoError(t, d.Err(), "Reset forgets the error")
	require.True(t, d.Next())
	assert.Equal(t, []byte("ok"), d.Data())
	assert.False(t, d.Next())
	assert.NoError(t, d.Err())
}

func TestDecoderZeroValueIsEmpty(t *testing.T) {
	var d Decoder
	assert.False(t, d.Next())
	assert.NoError(t, d.Err())
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := []msg{
		{Tag: 1, Data: "first"},
		{Tag: 1, Status: 200, Data: ""},
		{Tag: 1 << 63, Data: "high bit tag"},
		{Tag: 0, Status: 1, Data: "zero tag after another"},
		{Tag: 0, Data: "x"},
	}
	e := NewEncoder(make([]byte, 256))
	for _, m := range in {
		require.NoError(t, e.Append(m.Tag, m.Status, []byte(m.Data)))
	}
	got, err := decodeAll(e.Bytes())
	require.NoError(t, err)
	assert.Equal(t, in, got)
}

// decodeRuns decodes buf as a receiver that delivers runs does: Next, then
// NextPlain while it parses. A message NextPlain returns must carry the
// tag of the one before and status 0, and NextPlain returning false must
// leave the decoder as it was.
func decodeRuns(t *testing.T, buf []byte) ([]msg, error) {
	t.Helper()
	var d Decoder
	d.Reset(buf)
	if d.NextPlain() {
		t.Fatalf("NextPlain parsed the first message of % x", buf)
	}
	var got []msg
	for d.Next() {
		got = append(got, msg{d.Tag(), d.Status(), string(d.Data())})
		for d.NextPlain() {
			m := msg{d.Tag(), d.Status(), string(d.Data())}
			if prev := got[len(got)-1]; m.Tag != prev.Tag || m.Status != 0 || len(m.Data) != cap(d.Data()) {
				t.Fatalf("NextPlain gave %v (cap %d) after %v", m, cap(d.Data()), prev)
			}
			got = append(got, m)
		}
		if before := d; d.NextPlain() || d.count != before.count || d.off != before.off {
			t.Fatalf("NextPlain after it returned false: count %d -> %d, offset %d -> %d",
				before.count, d.count, before.off, d.off)
		}
	}
	if d.NextPlain() {
		t.Fatalf("NextPlain parsed a message after Next returned false (err %v)", d.Err())
	}
	return got, d.Err()
}

func TestNextPlainTakesOnlyTheRunsMessages(t *testing.T) {
	buf := concat(validOne,
		[]byte{1, 0, 0, 0, 'a'},                            // plain: tag 1 goes on
		[]byte{1, 0, 0, 0x40, 7, 'b'},                      // a status: not plain
		[]byte{1, 0, 0, 0, 'c'},                            // plain again
		[]byte{1, 0, 0, 0x80, 2, 0, 0, 0, 0, 0, 0, 0, 'd'}, // a new tag: not plain
		[]byte{5, 0, 0, 0, 'e'})                            // plain, but 5 bytes of payload are not there
	d := NewDecoder(buf)
	assert.False(t, d.NextPlain(), "the first message carries a tag")
	require.True(t, d.Next())
	require.True(t, d.NextPlain())
	assert.Equal(t, msg{1, 0, "a"}, msg{d.Tag(), d.Status(), string(d.Data())})
	assert.False(t, d.NextPlain(), "a message with a status")
	assert.Equal(t, 2, d.Count(), "a refused message is not counted")
	require.True(t, d.Next())
	assert.Equal(t, msg{1, 7, "b"}, msg{d.Tag(), d.Status(), string(d.Data())})
	require.True(t, d.NextPlain())
	assert.Equal(t, msg{1, 0, "c"}, msg{d.Tag(), d.Status(), string(d.Data())}, "the status does not carry over")
	assert.False(t, d.NextPlain(), "a message with a tag")
	require.True(t, d.Next())
	assert.Equal(t, msg{2, 0, "d"}, msg{d.Tag(), d.Status(), string(d.Data())})
	assert.False(t, d.NextPlain(), "a payload past the end")
	assert.NoError(t, d.Err(), "NextPlain reports no error")
	assert.False(t, d.Next())
	var me *MalformedError
	require.ErrorAs(t, d.Err(), &me)
	assert.Equal(t, len(buf)-5, me.Offset, "the error's offset is the bad message's")
	assert.Equal(t, 5, me.Index)
	assert.False(t, d.NextPlain(), "nothing after an error")

	got, err := decodeRuns(t, buf)
	want, wantErr := decodeAll(buf)
	assert.Equal(t, want, got)
	assert.True(t, sameError(wantErr, err))
}
