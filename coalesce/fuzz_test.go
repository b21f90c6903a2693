package coalesce

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder. It must never panic, must
// deliver exactly the valid prefix, must agree with Validate and with a
// decoding of runs through NextPlain (decodeRuns), and what it
// delivers must re-encode canonically into no more bytes than it consumed and
// decode back to the same messages. The seed corpus is in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add(workedExampleBytes)
	f.Add([]byte{})
	f.Add(validOne)
	f.Fuzz(func(t *testing.T, buf []byte) {
		got, err := decodeAll(buf)
		consumed := len(buf)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not a *MalformedError matching ErrMalformed", err)
			}
			if me.Offset < 0 || me.Offset >= len(buf) {
				t.Fatalf("offset %d outside the %d-byte buffer", me.Offset, len(buf))
			}
			if me.Index != len(got) {
				t.Fatalf("error at message %d after delivering %d", me.Index, len(got))
			}
			consumed = me.Offset
		}
		n, verr := Validate(buf)
		if n != len(got) || !sameError(verr, err) {
			t.Fatalf("Validate = %d, %v; Decode delivered %d, %v", n, verr, len(got), err)
		}
		runs, rerr := decodeRuns(t, buf)
		if !equalMsgs(runs, got) || !sameError(rerr, err) {
			t.Fatalf("runs through NextPlain: %v, %v; Decode: %v, %v", runs, rerr, got, err)
		}
		checkCanonical(t, got, consumed)
	})
}

// sameError reports whether a and b are both nil or describe the same
// malformation.
func sameError(a, b error) bool {
	var ma, mb *MalformedError
	if !errors.As(a, &ma) || !errors.As(b, &mb) {
		return a == nil && b == nil
	}
	return *ma == *mb
}

// checkCanonical re-encodes msgs into a buffer of limit bytes, which must
// hold them since the encoder never writes more than the input used, and
// checks that they decode back unchanged.
func checkCanonical(t *testing.T, msgs []msg, limit int) {
	t.Helper()
	e := NewEncoder(make([]byte, limit))
	for i, m := range msgs {
		if err := e.Append(m.Tag, m.Status, []byte(m.Data)); err != nil {
			t.Fatalf("re-encoding message %d of %d into %d bytes: %v", i, len(msgs), limit, err)
		}
	}
	again, err := decodeAll(e.Bytes())
	if err != nil {
		t.Fatalf("decoding the re-encoding: %v", err)
	}
	if !equalMsgs(again, msgs) {
		t.Fatalf("round trip changed the messages:\n got %v\nwant %v", again, msgs)
	}
}

// equalMsgs treats nil and empty lists as equal.
func equalMsgs(a, b []msg) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzRoundTrip drives an Encoder with a script of messages and a buffer
// size, sending (decoding) the buffer whenever Append reports ErrFull, and
// checks that every message that can fit comes out unchanged, that ErrFull is
// followed by a successful append into a fresh buffer, and that ErrTooLarge
// is reported exactly for messages larger than an empty buffer.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint16(64), []byte{0x11, 0, 10, 0x11, 0, 10, 0x23, 7, 0, 0x40, 1, 200})
	f.Add(uint16(13), []byte{0x01, 1, 0, 0x00, 0, 1, 0x01, 1, 1})
	f.Add(uint16(0), []byte{0x00, 0, 0})
	f.Fuzz(func(t *testing.T, bufLen uint16, script []byte) {
		r := roundTrip{t: t, size: int(bufLen % 1024)}
		r.e.Reset(make([]byte, r.size))
		for ; len(script) >= 3; script = script[3:] {
			r.append(scriptMessage(script[:3]))
		}
		r.flush()
		if !equalMsgs(r.received, r.sent) {
			t.Fatalf("received %v\nsent %v", r.received, r.sent)
		}
	})
}

// scriptMessage turns three script bytes into a message: a tag from a small
// set (so that tags repeat), a status when the low bit asks for one, and a
// payload whose bytes count up from the length.
func scriptMessage(c []byte) msg {
	m := msg{Tag: uint64(c[0]>>4) << 60}
	if c[0]&1 != 0 {
		m.Status = c[1]
	}
	data := make([]byte, c[2])
	for i := range data {
		data[i] = c[2] + byte(i)
	}
	m.Data = string(data)
	return m
}

// roundTrip is the state of one FuzzRoundTrip run.
type roundTrip struct {
	t        *testing.T
	size     int
	e        Encoder
	sent     []msg
	received []msg
}

func (r *roundTrip) append(m msg) {
	err := r.e.Append(m.Tag, m.Status, []byte(m.Data))
	tooLarge := len(m.Data) > r.size-Overhead(m.Status, true)
	switch {
	case errors.Is(err, ErrTooLarge) && tooLarge:
		return
	case errors.Is(err, ErrFull):
		r.flush()
		if err := r.e.Append(m.Tag, m.Status, []byte(m.Data)); err != nil {
			r.t.Fatalf("ErrFull, then %v in a fresh %d-byte buffer for %v", err, r.size, m)
		}
	case err != nil || tooLarge:
		r.t.Fatalf("Append(%v) into %d bytes = %v", m, r.size, err)
	}
	r.sent = append(r.sent, m)
}

// flush decodes what the encoder holds, as a receiver would, and starts a
// fresh buffer.
func (r *roundTrip) flush() {
	if r.e.Len() > r.size {
		r.t.Fatalf("encoded %d bytes into a %d-byte buffer", r.e.Len(), r.size)
	}
	got, err := decodeAll(r.e.Bytes())
	if err != nil {
		r.t.Fatalf("decoding our own buffer: %v", err)
	}
	if len(got) != r.e.Count() {
		r.t.Fatalf("decoded %d messages, encoder counted %d", len(got), r.e.Count())
	}
	r.received = append(r.received, got...)
	r.e.Reset(r.e.buf) // decodeAll copied the payloads out
}
