package coalesce

import (
	"encoding/binary"
	"fmt"
)

// A Decoder walks the messages of one received buffer, like bufio.Scanner:
// call Next until it returns false, read each message with Tag, Status and
// Data, then check Err.
//
// Messages come out in order as they are parsed, so when the buffer turns
// out to be malformed the messages before the bad one have already been
// returned (the valid prefix); nothing from the bad message on is. Call
// Validate first to act on a buffer only when all of it is well formed.
//
// A Decoder allocates nothing except the error of a malformed buffer, and
// Data aliases the buffer. Its zero value decodes an empty buffer. It is not
// safe for concurrent use.
type Decoder struct {
	buf    []byte
	off    int    // where the next message's header word starts in buf
	plain  []byte // buf once Next returned a message, nil before: what NextPlain reads
	count  int    // messages returned so far
	tag    uint64
	status uint8
	data   []byte
	err    error
}

// NewDecoder returns a Decoder over buf.
func NewDecoder(buf []byte) *Decoder {
	d := &Decoder{}
	d.Reset(buf)
	return d
}

// Reset starts decoding buf from its start, forgetting the previous buffer
// and its error.
func (d *Decoder) Reset(buf []byte) {
	*d = Decoder{buf: buf}
}

// Next parses the next message and reports whether there is one. It returns
// false at the end of the buffer and at the first malformed message; Err
// tells the two apart.
func (d *Decoder) Next() bool {
	return d.NextPlain() || d.next()
}

// NextPlain parses the next message if it carries neither a tag nor a
// status, that is if it goes on with the tag of the message before it
// (most messages of a coalesced buffer do), and reports whether it did.
// Otherwise (any other message, the end of the buffer, a malformed
// message, or the buffer's first message) it changes nothing and returns
// false: call Next, which parses every kind of message and tells the end
// from an error.
//
// It is small enough for the compiler to inline into the caller's loop,
// so that a receiver delivering a run of one tag's messages, as
//
//	for d.Next() {
//		// a message of any kind: d.Tag(), d.Status(), d.Data()
//		for d.NextPlain() {
//			// the same tag, status 0: d.Data()
//		}
//	}
//
// pays no call per message. After an error the remaining bytes start at
// the bad message, which this path never accepts (it fails none of the
// checks Next makes), so it needs no test of Err.
func (d *Decoder) NextPlain() bool {
	buf, off := d.plain, d.off
	if len(buf)-off >= HeaderWordLen {
		h := buf[off:len(buf):len(buf)] // its capacity is not 0: no masked pointer
		// No flags: the word is the size.
		if w := binary.LittleEndian.Uint32(h); w <= sizeMask && int(w) <= len(h)-HeaderWordLen {
			end := HeaderWordLen + int(w)
			d.status, d.data, d.off = 0, h[HeaderWordLen:end:end], off+end
			d.count++
			return true
		}
	}
	return false
}

// next parses the next message the general way: any header, and the
// errors.
func (d *Decoder) next() bool {
	d.data = nil
	rest := d.buf[d.off:]
	if d.err != nil || len(rest) == 0 {
		return false
	}
	if len(rest) < HeaderWordLen {
		return d.fail("truncated header word: %d of %d bytes", len(rest), HeaderWordLen)
	}
	word := binary.LittleEndian.Uint32(rest)
	at := HeaderWordLen
	var status uint8
	if word&flagStatus != 0 {
		if len(rest) < at+StatusLen {
			return d.fail("truncated status: header word ends the buffer")
		}
		status = rest[at]
		at += StatusLen
	}
	tag := d.tag
	switch {
	case word&flagTag != 0:
		if len(rest) < at+TagLen {
			return d.fail("truncated tag: %d of %d bytes", len(rest)-at, TagLen)
		}
		tag = binary.LittleEndian.Uint64(rest[at:])
		at += TagLen
	case d.count == 0:
		return d.fail("first message has no tag")
	}
	size := int(word & sizeMask)
	if size > len(rest)-at {
		return d.fail("payload of %d bytes exceeds the %d bytes left", size, len(rest)-at)
	}
	end := at + size
	d.tag, d.status, d.data, d.off, d.plain = tag, status, rest[at:end:end], d.off+end, d.buf
	d.count++
	return true
}

// fail records a malformed message at the current offset and returns false,
// for Next to return.
func (d *Decoder) fail(format string, args ...any) bool {
	d.err = &MalformedError{Offset: d.off, Index: d.count, Reason: fmt.Sprintf(format, args...)}
	return false
}

// Tag returns the tag of the message Next returned: the last tag the buffer
// carried.
func (d *Decoder) Tag() uint64 { return d.tag }

// Status returns the status byte of the message Next returned, 0 when it
// carried none.
func (d *Decoder) Status() uint8 { return d.status }

// Data returns the payload of the message Next returned. It aliases the
// buffer (its capacity ends with the payload) and is valid as long as the
// buffer is.
func (d *Decoder) Data() []byte { return d.data }

// Count returns how many messages Next has returned since Reset.
func (d *Decoder) Count() int { return d.count }

// Err returns nil after the last message of a well-formed buffer, and a
// *MalformedError (matching ErrMalformed) after a malformed one.
func (d *Decoder) Err() error { return d.err }

// Decode calls fn for every message of buf, in order, then returns nil, or
// a *MalformedError when the buffer breaks the format. As with Decoder, fn
// has then been called for the messages before the bad one and for none
// after. data aliases buf and is valid only as long as buf is; copy what
// you keep. An empty buffer holds no messages and is not an error.
func Decode(buf []byte, fn func(tag uint64, data []byte, status uint8)) error {
	var d Decoder
	d.Reset(buf)
	for d.Next() {
		fn(d.tag, d.data, d.status)
	}
	return d.err
}

// Validate parses all of buf without delivering anything and returns how
// many messages it holds, or the error Decode would return and the number of
// valid messages before the bad one.
func Validate(buf []byte) (int, error) {
	var d Decoder
	d.Reset(buf)
	for d.Next() {
	}
	return d.count, d.err
}
