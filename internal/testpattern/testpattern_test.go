package testpattern

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// want is the pattern's definition, written apart from the implementation:
// byte i of message seq of stream is (seq + 31·stream + i) mod 251, on
// integers (reduced first, so that no uint64 wraps).
func want(stream, seq uint64, i int) byte {
	return byte((seq%251 + 31*(stream%251) + uint64(i)%251) % 251)
}

// message returns message seq of stream of p, n bytes, in a new slice.
func message(p *Pattern, stream, seq uint64, n int) []byte {
	b := make([]byte, n)
	p.Fill(b, stream, seq)
	return b
}

// TestPatternMatchesFormula checks Fill of stream 0 without a header
// against netio-perf's --verify definition, which C peers check too: byte
// i of message k is (k + i) % 251, also past the modulus in both k and i
// and for k near the top of uint64.
func TestPatternMatchesFormula(t *testing.T) {
	p := New(1000)
	for _, k := range []uint64{0, 1, 250, 251, 252, 1 << 40, math.MaxUint64} {
		buf := message(p, 0, k, 1000)
		for i, b := range buf {
			// big-integer (k + i) % 251 without overflow
			if !assert.Equal(t, byte((k%251+uint64(i))%251), b, "message %d byte %d", k, i) {
				break
			}
		}
		assert.NoError(t, p.Check(buf, 0, k), "message %d", k)
	}
	// The literal bytes cpeer expects of message 3: its table is j % 251
	// and message k starts at entry k % 251.
	assert.Equal(t, []byte{3, 4, 5, 6}, message(p, 0, 3, 4))
	assert.Equal(t, []byte{249, 250, 0, 1}, message(p, 0, 249, 4))
}

// TestStreamsMatchFormula checks every stream's pattern against the
// definition, and that streams differ.
func TestStreamsMatchFormula(t *testing.T) {
	p := New(600)
	for _, s := range []uint64{1, 2, 250, 251, 1 << 33, math.MaxUint64} {
		for _, k := range []uint64{0, 7, 251, math.MaxUint64} {
			buf := message(p, s, k, 600)
			for i, b := range buf {
				if !assert.Equal(t, want(s, k, i), b, "stream %d message %d byte %d", s, k, i) {
					break
				}
			}
		}
	}
	assert.NotEqual(t, message(p, 0, 7, 64), message(p, 1, 7, 64))
	assert.Equal(t, message(p, 0, 31, 64), message(p, 1, 0, 64), "without a header, stream s is stream 0 shifted by 31·s")
}

// TestHeaderLayout pins the header byte for byte and the body under it.
func TestHeaderLayout(t *testing.T) {
	p := New(4096, WithHeader())
	require.True(t, p.HasHeader())
	b := message(p, 0x0102030405060708, 0x1112131415161718, 100)
	assert.Equal(t, []byte("neto"), b[0:4], "magic")
	assert.Equal(t, []byte{100, 0, 0, 0}, b[4:8], "length, little endian")
	assert.Equal(t, []byte{8, 7, 6, 5, 4, 3, 2, 1}, b[8:16], "stream, little endian")
	assert.Equal(t, []byte{0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11}, b[16:24], "sequence number, little endian")
	for i := HeaderSize; i < len(b); i++ {
		require.Equal(t, want(0x0102030405060708, 0x1112131415161718, i), b[i], "byte %d", i)
	}
	h, ok := ParseHeader(b)
	require.True(t, ok)
	assert.Equal(t, Header{Len: 100, Stream: 0x0102030405060708, Seq: 0x1112131415161718}, h)
	assert.True(t, IsMessage(b))
	assert.NoError(t, p.Check(b, 0x0102030405060708, 0x1112131415161718))

	// The smallest message is the header alone.
	assert.NoError(t, p.Check(message(p, 3, 7, HeaderSize), 3, 7))
}

// kindOf returns the Kind of err, failing the test if err is not an *Error.
func kindOf(t *testing.T, err error) Kind {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	return e.Kind
}

// TestCheckCatchesDamage checks that Check accepts what Fill wrote and
// names each kind of damage, with the message and the byte.
func TestCheckCatchesDamage(t *testing.T) {
	const size = 4096
	p := New(64<<10, WithHeader())
	msg := func(stream, seq uint64) []byte { return message(p, stream, seq, size) }
	require.NoError(t, p.Check(msg(3, 7), 3, 7))
	require.NoError(t, p.Check(msg(0, 1<<40), 0, 1<<40), "large sequence numbers")

	t.Run("corrupted byte", func(t *testing.T) {
		flipped := msg(3, 7)
		flipped[1000] ^= 0x40
		err := p.Check(flipped, 3, 7)
		assert.EqualError(t, err, fmt.Sprintf("stream 3 message 7: byte 1000 is %#x, want %#x", want(3, 7, 1000)^0x40, want(3, 7, 1000)))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, Error{Kind: ByteDiffers, Stream: 3, Seq: 7, Len: size, Offset: 1000,
			Got: uint64(want(3, 7, 1000) ^ 0x40), Want: uint64(want(3, 7, 1000))}, *e)
	})
	t.Run("last byte", func(t *testing.T) {
		b := msg(3, 7)
		b[size-1]++
		assert.ErrorContains(t, p.Check(b, 3, 7), "byte 4095 ")
	})
	t.Run("truncated", func(t *testing.T) {
		err := p.Check(msg(3, 7)[:size-1], 3, 7)
		assert.ErrorContains(t, err, "4095 bytes, want 4096")
		assert.Equal(t, WrongLength, kindOf(t, err))
	})
	t.Run("wrong stream", func(t *testing.T) {
		err := p.Check(msg(4, 7), 3, 7)
		assert.ErrorContains(t, err, "stream 4, want stream 3")
		assert.Equal(t, WrongStream, kindOf(t, err))
	})
	t.Run("wrong message", func(t *testing.T) {
		err := p.Check(msg(3, 8), 3, 7)
		assert.ErrorContains(t, err, "message 8, want 7")
		assert.Equal(t, WrongSeq, kindOf(t, err))
	})
	t.Run("shifted body", func(t *testing.T) { // as a misplaced copy would leave it
		shifted := msg(3, 7)
		copy(shifted[HeaderSize:], shifted[HeaderSize+1:])
		assert.ErrorContains(t, p.Check(shifted, 3, 7), "byte 24 ")
	})
	t.Run("another stream's body", func(t *testing.T) {
		swapped := msg(3, 7)
		copy(swapped[HeaderSize:], msg(4, 7)[HeaderSize:])
		assert.ErrorContains(t, p.Check(swapped, 3, 7), "byte 24 ")
	})
	t.Run("not a message", func(t *testing.T) {
		junk := make([]byte, size)
		for i := range junk {
			junk[i] = 0xA5 // what tests/hostile's C peer sends
		}
		assert.False(t, IsMessage(junk))
		assert.Equal(t, NotMessage, kindOf(t, p.Check(junk, 3, 7)))
		assert.Equal(t, NotMessage, kindOf(t, p.Check(msg(3, 7)[:HeaderSize-1], 3, 7)), "shorter than a header")
		bad := msg(3, 7)
		bad[0] ^= 1
		assert.ErrorContains(t, p.Check(bad, 3, 7), "4096 bytes that do not start with a pattern header")
	})
	t.Run("longer than the pattern", func(t *testing.T) {
		small := New(64, WithHeader())
		b := make([]byte, 65)
		copy(b, message(small, 3, 7, 64))
		binary.LittleEndian.PutUint32(b[4:], 65)
		err := small.Check(b, 3, 7)
		assert.ErrorContains(t, err, "65 bytes, longer than the 64 the pattern covers")
		assert.Equal(t, TooLong, kindOf(t, err))
	})
}

// TestCheckWithoutHeader: a prefix of the right message matches, anything
// else does not, and the error names the first byte that differs.
func TestCheckWithoutHeader(t *testing.T) {
	p := New(16)
	assert.NoError(t, p.Check(nil, 0, 7))
	assert.NoError(t, p.Check([]byte{7, 8, 9}, 0, 7))
	assert.EqualError(t, p.Check([]byte{7, 8, 9}, 0, 8), "stream 0 message 8: byte 0 is 0x7, want 0x8")
	assert.EqualError(t, p.Check([]byte{8, 9, 11}, 0, 8), "stream 0 message 8: byte 2 is 0xb, want 0xa")
	assert.Equal(t, TooLong, kindOf(t, p.Check(make([]byte, 17), 0, 0)))
	assert.Equal(t, ByteDiffers, kindOf(t, p.Check(message(p, 1, 7, 16), 0, 7)), "another stream")
}

// TestCheckerCountsCorruption feeds a stream's messages through a Checker:
// a corrupted byte, a lost message, a message longer than the pattern, a
// receive error and a message of the wrong length are each one error, and
// the checker moves on past each.
func TestCheckerCountsCorruption(t *testing.T) {
	p := New(64)
	c := Checker{Pattern: p}
	for k := range uint64(300) {
		require.NoError(t, c.Check(message(p, 0, k, 64)), "clean message %d", k)
	}
	require.Zero(t, c.Errors)

	bad := message(p, 0, 300, 64)
	bad[17] ^= 0x01
	assert.ErrorContains(t, c.Check(bad), "stream 0 message 300: byte 17 ")
	assert.Equal(t, uint64(1), c.Errors)

	// Message 301 is lost: 302 arrives where 301 is expected.
	assert.ErrorContains(t, c.Check(message(p, 0, 302, 64)), "message 301: byte 0 ")
	assert.Equal(t, uint64(2), c.Errors)

	assert.Error(t, c.Check(make([]byte, 65)), "longer than the pattern")
	assert.Equal(t, uint64(3), c.Errors)
	assert.Equal(t, uint64(303), c.Next)

	c.Lost()
	assert.Equal(t, uint64(4), c.Errors)
	assert.NoError(t, c.Check(message(p, 0, 304, 64)), "in step again after a receive error")

	c.Len = 64
	err := c.Check(message(p, 0, 305, 32))
	assert.EqualError(t, err, "stream 0 message 305: 32 bytes, want 64", "a right prefix of the wrong length")
	assert.Equal(t, uint64(5), c.Errors)
	assert.Equal(t, uint64(306), c.Next)
}

// TestCheckerSeek: a gap in the sequence numbers is one error, after which
// the checker is in step with the sender again.
func TestCheckerSeek(t *testing.T) {
	p := New(32, WithHeader())
	c := Checker{Pattern: p, Stream: 5, Next: 10}
	require.NoError(t, c.Seek(10))
	require.NoError(t, c.Check(message(p, 5, 10, 32)))
	err := c.Seek(13)
	assert.EqualError(t, err, "stream 5 message 11: got message 13, want 11 (lost, repeated or reordered)")
	assert.Equal(t, uint64(1), c.Errors)
	assert.NoError(t, c.Check(message(p, 5, 13, 32)))
	assert.NoError(t, c.Seek(14))
	assert.Equal(t, uint64(1), c.Errors)
	assert.Equal(t, WrongStream, kindOf(t, c.Check(message(p, 6, 14, 32))))
}

// TestFillRejectsWhatItCannotWrite: too long for the table, or too short
// for the header, is a programming error of the caller.
func TestFillRejectsWhatItCannotWrite(t *testing.T) {
	assert.Panics(t, func() { New(8).Fill(make([]byte, 9), 0, 0) })
	assert.Panics(t, func() { New(64, WithHeader()).Fill(make([]byte, HeaderSize-1), 0, 0) })
	assert.Panics(t, func() { New(8).Bytes(0, 0, -1) })
	assert.Equal(t, 0, New(-5).MaxLen())
}

// TestNoAllocations: filling and checking messages, with and without a
// header, allocate nothing (DESIGN.md: hot paths do not allocate; netio-perf
// fills and checks on its measured path).
func TestNoAllocations(t *testing.T) {
	for _, p := range []*Pattern{New(4096), New(4096, WithHeader())} {
		buf := make([]byte, 4096)
		c := Checker{Pattern: p, Stream: 2, Len: 4096}
		seq := uint64(0)
		allocs := testing.AllocsPerRun(100, func() {
			p.Fill(buf, 2, seq)
			if err := p.Check(buf, 2, seq); err != nil {
				t.Fatal(err)
			}
			if err := c.Seek(seq); err != nil {
				t.Fatal(err)
			}
			if err := c.Check(buf); err != nil {
				t.Fatal(err)
			}
			_ = p.Bytes(2, seq, 4096)
			_, _ = ParseHeader(buf)
			seq++
		})
		assert.Zero(t, allocs, "header %v", p.HasHeader())
	}
}

// FuzzCheck feeds peer-supplied bytes to both checkers: neither panics,
// each accepts exactly the bytes of the pattern's definition, and a header
// that parses is checked against the data it heads.
func FuzzCheck(f *testing.F) {
	plain, headed := New(300), New(300, WithHeader())
	f.Add(plain.Bytes(0, 0, 300), uint64(0), uint64(0))
	f.Add(message(headed, 3, 7, 100), uint64(3), uint64(7))
	f.Add(message(headed, 3, 7, HeaderSize), uint64(3), uint64(7))
	f.Add(message(headed, 3, 8, 100), uint64(3), uint64(7))
	f.Add([]byte{}, uint64(0), uint64(1<<40))
	f.Add(make([]byte, 301), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, stream, seq uint64) {
		// Without a header: any prefix of the message, up to MaxLen.
		ok := len(data) <= plain.MaxLen()
		for i := 0; ok && i < len(data); i++ {
			ok = data[i] == want(stream, seq, i)
		}
		if err := plain.Check(data, stream, seq); (err == nil) != ok {
			t.Errorf("plain Check(% x, %d, %d) = %v, want ok %v", data, stream, seq, err, ok)
		}

		// With a header: exactly the message Fill writes.
		ok = len(data) >= HeaderSize && len(data) <= headed.MaxLen()
		if ok {
			ok = string(data) == string(message(headed, stream, seq, len(data)))
		}
		err := headed.Check(data, stream, seq)
		if (err == nil) != ok {
			t.Errorf("headed Check(% x, %d, %d) = %v, want ok %v", data, stream, seq, err, ok)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Stream != stream || e.Seq != seq || e.Error() == "" {
				t.Errorf("headed Check(% x, %d, %d): error %#v does not name the message", data, stream, seq, err)
			}
			if e != nil && e.Kind == ByteDiffers && (e.Offset < HeaderSize || e.Offset >= len(data) || uint64(data[e.Offset]) != e.Got) {
				t.Errorf("headed Check(% x, %d, %d): %v names a byte it did not see", data, stream, seq, err)
			}
		}

		// Whatever header parses, checking the data as the message it
		// names succeeds exactly when the data is that message.
		if h, parsed := ParseHeader(data); parsed {
			self := h.Len == len(data) && len(data) <= headed.MaxLen() &&
				string(data) == string(message(headed, h.Stream, h.Seq, len(data)))
			if err := headed.Check(data, h.Stream, h.Seq); (err == nil) != self {
				t.Errorf("Check of % x as the message its header names = %v, want ok %v", data, err, self)
			}
		} else if IsMessage(data) {
			t.Errorf("IsMessage(% x) but ParseHeader fails", data)
		}
	})
}

// BenchmarkFillCheck measures a fill and a check of a 4 KiB message.
func BenchmarkFillCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		p    *Pattern
	}{{"plain", New(4096)}, {"header", New(4096, WithHeader())}} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for i := range uint64(b.N) {
				bc.p.Fill(buf, 1, i)
				if err := bc.p.Check(buf, 1, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
