package coalesce

import "encoding/binary"

// An Encoder appends messages to a caller's buffer in the coalesced format.
// The whole length of the buffer is usable; Bytes returns the encoded part,
// which is what goes on the wire.
//
// An Encoder is a small value that allocates nothing; its zero value is an
// encoder over an empty buffer, which holds nothing. It is not safe for
// concurrent use.
type Encoder struct {
	buf   []byte
	n     int    // bytes encoded so far
	count int    // messages encoded so far
	tag   uint64 // tag of the last message, valid when count > 0
}

// NewEncoder returns an Encoder that writes into buf from its start.
func NewEncoder(buf []byte) *Encoder {
	e := &Encoder{}
	e.Reset(buf)
	return e
}

// Reset discards what was encoded and starts again at the start of buf, for
// example a fresh send buffer after the previous one was sent. The next
// message carries its tag whatever the previous buffer held.
func (e *Encoder) Reset(buf []byte) {
	*e = Encoder{buf: buf}
}

// Len returns how many bytes are encoded: the length of the message to send.
func (e *Encoder) Len() int { return e.n }

// Count returns how many messages are encoded.
func (e *Encoder) Count() int { return e.count }

// Remaining returns how many bytes of the buffer are still free.
func (e *Encoder) Remaining() int { return len(e.buf) - e.n }

// Bytes returns the encoded messages, a prefix of the buffer given to Reset.
func (e *Encoder) Bytes() []byte { return e.buf[:e.n] }

// Append encodes one message with a copy of data. It returns nil when the
// message was added, ErrFull when it does not fit in what is left but would
// fit in an empty buffer (send Bytes, Reset onto a fresh buffer, append
// again), or ErrTooLarge when it can never fit. On error nothing changes.
func (e *Encoder) Append(tag uint64, status uint8, data []byte) error {
	dst, err := e.Reserve(tag, status, len(data))
	if err != nil {
		return err
	}
	copy(dst, data)
	return nil
}

// AppendV is Append for a payload given in pieces (scatter-gather): the
// message's payload is the concatenation of parts.
func (e *Encoder) AppendV(tag uint64, status uint8, parts [][]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
		if n > MaxPayload {
			return ErrTooLarge
		}
	}
	dst, err := e.Reserve(tag, status, n)
	if err != nil {
		return err
	}
	for _, p := range parts {
		dst = dst[copy(dst, p):]
	}
	return nil
}

// Reserve encodes the header of a message with an n-byte payload and returns
// the n bytes of the buffer where the payload goes, for a caller that produces
// the payload in place instead of copying it. The caller must fill all n bytes
// before the buffer is sent. Errors are those of Append, and a negative n is
// an error matching netio.ErrInvalidArgument; on error nothing changes.
func (e *Encoder) Reserve(tag uint64, status uint8, n int) ([]byte, error) {
	withTag := e.count == 0 || tag != e.tag
	head := Overhead(status, withTag)
	if err := e.check(status, head, n); err != nil {
		return nil, err
	}
	end := e.n + head + n
	b := e.buf[e.n:end:end] // the caller's payload cannot grow into later messages
	word := uint32(n)
	if status != 0 {
		word |= flagStatus
		b[HeaderWordLen] = status
	}
	if withTag {
		word |= flagTag
		binary.LittleEndian.PutUint64(b[head-TagLen:], tag)
	}
	binary.LittleEndian.PutUint32(b, word)
	e.n = end
	e.count++
	e.tag = tag
	return b[head:], nil
}

// check reports whether a message of head+n bytes fits now, and if not,
// whether it would fit in an empty buffer.
func (e *Encoder) check(status uint8, head, n int) error {
	switch {
	case n < 0:
		return errNegativeSize
	case n > MaxPayload || n > len(e.buf)-Overhead(status, true):
		return ErrTooLarge
	case n > len(e.buf)-e.n-head:
		return ErrFull
	}
	return nil
}
