package coalesce

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the decoder. It must never panic, must
// deliver exactly the valid prefix, must agree with refDecode (written from
// docs/wire.md, sharing no code with it), with Validate and with a decoding
// of runs through NextPlain (decodeRuns), and what it delivers must
// re-encode canonically into no more bytes than it consumed and decode back
// to the same messages. The seed corpus is in testdata/fuzz/FuzzDecode.
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
		checkReference(t, buf, got, err)
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

// checkReference fails t unless Decode's messages got and error err are
// what refDecode makes of buf: the same messages, and the same
// malformation at the same offset and index, for the same reason.
func checkReference(t *testing.T, buf []byte, got []msg, err error) {
	t.Helper()
	want, bad := refDecode(buf)
	if !equalMsgs(got, want) {
		t.Fatalf("Decode delivered %d messages %v; the reference %d: %v", len(got), got, len(want), want)
	}
	var me *MalformedError
	switch {
	case bad == nil && err == nil:
	case bad == nil || !errors.As(err, &me):
		t.Fatalf("Decode: %v; the reference: %+v", err, bad)
	case me.Offset != bad.offset || me.Index != bad.index || !strings.Contains(me.Reason, bad.says):
		t.Fatalf("Decode: %+v; the reference: %+v", *me, *bad)
	}
}

// refMalformed is where and why refDecode found a buffer malformed; says
// is the part of the reason docs/wire.md names that Decode's Reason holds.
type refMalformed struct {
	offset, index int
	says          string
}

// refDecode decodes buf as docs/wire.md's "Reading" and "Malformed
// buffers" say, one field after another, and shares no code with Decoder:
// the reference FuzzDecode holds Decode against. It returns the messages
// before the first malformed one, and that one's malformation, or nil.
func refDecode(buf []byte) ([]msg, *refMalformed) {
	var out []msg
	var tag uint64
	for off := 0; off < len(buf); {
		bad := &refMalformed{offset: off, index: len(out)}
		p := off
		if len(buf)-p < 4 {
			bad.says = "truncated header word"
			return out, bad
		}
		word := littleEndian(buf[p : p+4])
		p += 4
		var status uint8
		if word&(1<<30) != 0 {
			if p == len(buf) {
				bad.says = "truncated status"
				return out, bad
			}
			status = buf[p]
			p++
		}
		switch {
		case word&(1<<31) != 0:
			if len(buf)-p < 8 {
				bad.says = "truncated tag"
				return out, bad
			}
			tag = littleEndian(buf[p : p+8])
			p += 8
		case len(out) == 0:
			bad.says = "first message has no tag"
			return out, bad
		}
		size := int(word & (1<<30 - 1))
		if size > len(buf)-p {
			bad.says = "exceeds"
			return out, bad
		}
		out = append(out, msg{Tag: tag, Status: status, Data: string(buf[p : p+size])})
		off = p + size
	}
	return out, nil
}

// littleEndian is the unsigned integer of b, least significant byte first.
func littleEndian(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
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
