// Package coalesce packs many small messages into one send buffer and unpacks
// them again, in netio3's buffer format, so that a C++ netio3 peer can read
// what netio-go writes and the other way round.
//
// A buffer holds messages back to back. Each message is a 32-bit
// little-endian header word (bit 31: a 64-bit tag follows, bit 30: a status
// byte follows, bits 0–29: payload size), the status byte when the status is
// not 0, the little-endian 64-bit tag (always in a buffer's first message,
// later only when it changes), then the payload. There is no padding. The full
// specification, with a worked example, is docs/wire.md.
//
// The package does no I/O and allocates nothing on its hot paths: an Encoder
// writes into a caller's []byte (typically a registered send buffer), and a
// Decoder walks a received []byte, handing out sub-slices of it.
//
// A message is an opaque payload with a tag (a stream or channel identifier
// chosen by the application) and a status byte. Status 0 means a plain
// message with no status; it costs no byte on the wire. The meaning of the
// values 1–255 belongs to the application.
package coalesce

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
)

// Sizes of the parts of a message on the wire, in bytes.
const (
	// HeaderWordLen is the size of the header word every message starts
	// with.
	HeaderWordLen = 4
	// StatusLen is the size of the status byte, present when the status is
	// not 0.
	StatusLen = 1
	// TagLen is the size of the tag, present in a buffer's first message and
	// whenever the tag changes.
	TagLen = 8
	// MaxOverhead is the most bytes a message takes besides its payload:
	// header word, status byte and tag.
	MaxOverhead = HeaderWordLen + StatusLen + TagLen
	// MaxPayload is the largest payload the 30-bit size field can describe.
	MaxPayload = 1<<30 - 1
)

// Bits of the header word.
const (
	flagTag    = 1 << 31
	flagStatus = 1 << 30
	sizeMask   = 1<<30 - 1
)

var (
	// ErrFull reports that a message does not fit in what is left of the
	// buffer but fits in an empty buffer of the same size: send the buffer,
	// Reset the Encoder onto a fresh one and append the message again.
	ErrFull = errors.New("coalesce: buffer full")

	// ErrTooLarge reports a message that no buffer of this size can ever
	// hold: its payload exceeds MaxPayload, or the buffer's length minus the
	// overhead of a buffer's first message. It matches
	// netio.ErrInvalidArgument too.
	ErrTooLarge = fmt.Errorf("coalesce: message larger than an empty buffer: %w", netio.ErrInvalidArgument)

	// errNegativeSize reports a negative size given to Reserve.
	errNegativeSize = fmt.Errorf("coalesce: negative payload size: %w", netio.ErrInvalidArgument)

	// ErrMalformed is matched (with errors.Is) by every *MalformedError, the
	// error decoding returns for a buffer that breaks the format.
	ErrMalformed = errors.New("coalesce: malformed buffer")
)

// Overhead returns how many bytes a message with this status takes besides
// its payload: the header word, the status byte when status is not 0, and the
// tag when withTag is set. A buffer's first message always carries its tag, so
// an empty buffer holds a payload of at most len(buf) - Overhead(status, true)
// bytes.
func Overhead(status uint8, withTag bool) int {
	n := HeaderWordLen
	if status != 0 {
		n += StatusLen
	}
	if withTag {
		n += TagLen
	}
	return n
}

// MalformedError describes where and why a buffer breaks the format. It
// matches ErrMalformed with errors.Is.
type MalformedError struct {
	// Offset is the byte offset in the buffer of the header word of the
	// message that could not be decoded.
	Offset int
	// Index is the position of that message in the buffer, counting from 0;
	// it is also how many valid messages precede it.
	Index int
	// Reason says what is wrong, e.g. "truncated tag".
	Reason string
}

// Error returns a one-line description with the offset and the reason.
func (e *MalformedError) Error() string {
	return fmt.Sprintf("%v: message %d at offset %d: %s", ErrMalformed, e.Index, e.Offset, e.Reason)
}

// Unwrap returns ErrMalformed, so that errors.Is(err, ErrMalformed) holds.
func (e *MalformedError) Unwrap() error { return ErrMalformed }
