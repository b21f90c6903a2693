// Package testpattern is the one test pattern of netio-go: what netio-perf
// --verify, the storm and hostile-peer tests, the network-namespace tests
// and the soak write into messages, and how their receivers check them.
//
// # The pattern
//
// Byte i of message seq of stream is
//
//	(seq + 31·stream + i) mod 251
//
// computed on integers, without wrap-around. 251 is a prime that is not a
// power of two, so that shifted, repeated or stale data shows up; the
// stream moves the pattern so that one stream's message is not another's.
// With stream 0 this is netio-perf's --verify pattern, byte i of message k
// is (k + i) % 251, which the C peers (tests/cpeer, and anything else that
// speaks to netio-perf) check too: it must never change.
//
// # The header (an option)
//
// A message that must name itself (receivers that learn the stream from
// the data, senders whose messages may be lost, repeated or of any length)
// carries a header of HeaderSize bytes, written over the first bytes of
// the pattern; the rest of the message is the pattern at the same offsets.
// All fields are little endian:
//
//	offset 0   uint32  magic 0x6f74656e ("neto" in memory)
//	offset 4   uint32  length of the whole message, header included
//	offset 8   uint64  stream
//	offset 16  uint64  sequence number
//
// Without the option nothing but the pattern is on the wire, and the
// sequence number is implicit: the receiver counts messages.
//
// Fill and Check are a copy and a compare from a precomputed table: they
// do not allocate (Check allocates only the *Error it returns).
package testpattern

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Mod is the modulus of the pattern.
const Mod = 251

// streamStride is what one stream adds to the pattern's offset.
const streamStride = 31

// HeaderSize is the size of the header of a pattern with WithHeader.
const HeaderSize = 24

// magic opens every header; a message without it is not a pattern message.
const magic = 0x6f74656e

// Pattern writes and checks the messages of up to MaxLen bytes. It is
// read-only once made, so one Pattern may serve any number of goroutines.
type Pattern struct {
	table  []byte // table[j] = j % Mod, for j < maxLen+Mod
	maxLen int
	header bool
}

// Option changes what New makes.
type Option func(*Pattern)

// WithHeader makes every message start with a header naming its stream,
// sequence number and length (see the package documentation). Messages
// must then be at least HeaderSize bytes long.
func WithHeader() Option {
	return func(p *Pattern) { p.header = true }
}

// New returns a pattern for messages of up to maxLen bytes. A negative
// maxLen counts as 0.
func New(maxLen int, opts ...Option) *Pattern {
	maxLen = max(maxLen, 0)
	p := &Pattern{table: make([]byte, maxLen+Mod), maxLen: maxLen}
	for j := range p.table {
		p.table[j] = byte(j % Mod)
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// MaxLen returns the longest message the pattern covers.
func (p *Pattern) MaxLen() int { return p.maxLen }

// HasHeader reports whether messages carry a header (WithHeader).
func (p *Pattern) HasHeader() bool { return p.header }

// offset returns where message seq of stream starts in the table.
func offset(stream, seq uint64) int {
	return int((seq%Mod + streamStride*(stream%Mod)) % Mod)
}

// Bytes returns bytes 0 to n-1 of the pattern of message seq of stream, as
// a slice of the pattern's table that the caller must not modify. Without
// a header it is the message itself (netio-perf hands it to SendMessage,
// which copies it); with a header, the message is this with its first
// HeaderSize bytes replaced by the header. n must be 0..MaxLen.
func (p *Pattern) Bytes(stream, seq uint64, n int) []byte {
	if n < 0 || n > p.maxLen {
		panic(fmt.Sprintf("testpattern: %d bytes requested of a pattern of at most %d", n, p.maxLen))
	}
	off := offset(stream, seq)
	return p.table[off : off+n : off+n]
}

// Fill writes message seq of stream into all of dst. dst must be at most
// MaxLen bytes long, and with a header at least HeaderSize; Fill panics
// otherwise, as a slice expression out of range would.
func (p *Pattern) Fill(dst []byte, stream, seq uint64) {
	if p.header && len(dst) < HeaderSize {
		panic(fmt.Sprintf("testpattern: a message of %d bytes cannot hold the %d-byte header", len(dst), HeaderSize))
	}
	copy(dst, p.Bytes(stream, seq, len(dst)))
	if p.header {
		putHeader(dst, stream, seq)
	}
}

func putHeader(dst []byte, stream, seq uint64) {
	binary.LittleEndian.PutUint32(dst[0:], magic)
	binary.LittleEndian.PutUint32(dst[4:], uint32(len(dst)))
	binary.LittleEndian.PutUint64(dst[8:], stream)
	binary.LittleEndian.PutUint64(dst[16:], seq)
}

// Header is what the header of a message says.
type Header struct {
	Len    int // length of the whole message, header included
	Stream uint64
	Seq    uint64
}

// ParseHeader reads the header at the start of data. ok is false when data
// is shorter than a header or does not start with the header's magic: it
// is not a message of a pattern with a header. The header is not checked
// against data: Check does that.
func ParseHeader(data []byte) (h Header, ok bool) {
	if len(data) < HeaderSize || binary.LittleEndian.Uint32(data) != magic {
		return Header{}, false
	}
	return Header{
		Len:    int(binary.LittleEndian.Uint32(data[4:])),
		Stream: binary.LittleEndian.Uint64(data[8:]),
		Seq:    binary.LittleEndian.Uint64(data[16:]),
	}, true
}

// IsMessage reports whether data starts with a header: whether it is
// meant to be a message of a pattern with a header at all.
func IsMessage(data []byte) bool {
	_, ok := ParseHeader(data)
	return ok
}

// Check returns nil if data is exactly message seq of stream, and an *Error
// saying what differs otherwise. Without a header any length up to MaxLen
// is accepted: data must be the first len(data) bytes of the message (the
// receiver knows the length it expects; Checker.Len checks it). With a
// header, data must be a whole message: the header's length, stream and
// sequence number must be len(data), stream and seq.
func (p *Pattern) Check(data []byte, stream, seq uint64) error {
	start := 0
	if p.header {
		h, ok := ParseHeader(data)
		switch {
		case !ok:
			return &Error{Kind: NotMessage, Stream: stream, Seq: seq, Len: len(data)}
		case h.Len != len(data):
			return &Error{Kind: WrongLength, Stream: stream, Seq: seq, Len: len(data), Got: uint64(len(data)), Want: uint64(h.Len)}
		case h.Stream != stream:
			return &Error{Kind: WrongStream, Stream: stream, Seq: seq, Len: len(data), Got: h.Stream, Want: stream}
		case h.Seq != seq:
			return &Error{Kind: WrongSeq, Stream: stream, Seq: seq, Len: len(data), Got: h.Seq, Want: seq}
		}
		start = HeaderSize
	}
	if len(data) > p.maxLen {
		return &Error{Kind: TooLong, Stream: stream, Seq: seq, Len: len(data), Got: uint64(len(data)), Want: uint64(p.maxLen)}
	}
	want := p.Bytes(stream, seq, len(data))
	if bytes.Equal(data[start:], want[start:]) {
		return nil
	}
	i := start
	for data[i] == want[i] {
		i++
	}
	return &Error{Kind: ByteDiffers, Stream: stream, Seq: seq, Len: len(data), Offset: i, Got: uint64(data[i]), Want: uint64(want[i])}
}

// Kind is what is wrong with a message.
type Kind uint8

// The kinds of Error.
const (
	// ByteDiffers: byte Offset is Got, not Want.
	ByteDiffers Kind = iota + 1
	// WrongLength: the message has Got bytes where Want were due (the
	// header's length, or Checker.Len).
	WrongLength
	// TooLong: the message has Got bytes, more than the Want the pattern
	// covers.
	TooLong
	// NotMessage: with a header, the data is shorter than a header or does
	// not start with one.
	NotMessage
	// WrongStream: the header names stream Got, not Want.
	WrongStream
	// WrongSeq: the header names message Got, not Want (lost, repeated or
	// reordered); also Checker.Seek's gaps.
	WrongSeq
)

// Error says which message differs from the pattern and how: the message
// that was due, what is wrong (Kind), and where (Offset, for a byte).
type Error struct {
	Kind        Kind
	Stream, Seq uint64 // the message that was due
	Len         int    // bytes received
	Offset      int    // ByteDiffers: the first byte that differs
	Got, Want   uint64 // per Kind: bytes, lengths, streams or sequence numbers
}

// Error describes the difference, naming stream, message and byte.
func (e *Error) Error() string {
	at := fmt.Sprintf("stream %d message %d: ", e.Stream, e.Seq)
	switch e.Kind {
	case ByteDiffers:
		return at + fmt.Sprintf("byte %d is %#x, want %#x", e.Offset, e.Got, e.Want)
	case WrongLength:
		return at + fmt.Sprintf("%d bytes, want %d", e.Got, e.Want)
	case TooLong:
		return at + fmt.Sprintf("%d bytes, longer than the %d the pattern covers", e.Got, e.Want)
	case NotMessage:
		return at + fmt.Sprintf("%d bytes that do not start with a pattern header", e.Len)
	case WrongStream:
		return at + fmt.Sprintf("header says stream %d, want stream %d", e.Got, e.Want)
	case WrongSeq:
		return at + fmt.Sprintf("got message %d, want %d (lost, repeated or reordered)", e.Got, e.Want)
	}
	return at + fmt.Sprintf("unknown difference %d", e.Kind)
}

// Checker checks the messages of one stream in the order they are due: the
// message it checks is always message Next, and Next moves on after each,
// matched or not, so that one damaged message costs one error. It is not
// safe for concurrent use; a receiver keeps one per stream.
type Checker struct {
	Pattern *Pattern
	Stream  uint64
	// Next is the sequence number of the message due next; set it before
	// the first message to start elsewhere than 0.
	Next uint64
	// Len, if not 0, is the length every message must have. Without it a
	// message without a header may be any prefix of its pattern.
	Len int
	// Errors counts messages that did not match, were lost or out of
	// sequence.
	Errors uint64
}

// Check checks data as message Next, moves Next on, and returns what
// differs (nil if nothing).
func (c *Checker) Check(data []byte) error {
	seq := c.Next
	c.Next++
	var err error
	if c.Len != 0 && len(data) != c.Len {
		err = &Error{Kind: WrongLength, Stream: c.Stream, Seq: seq, Len: len(data), Got: uint64(len(data)), Want: uint64(c.Len)}
	} else {
		err = c.Pattern.Check(data, c.Stream, seq)
	}
	if err != nil {
		c.Errors++
	}
	return err
}

// Lost counts message Next as an error without data (a receive that
// failed) and moves past it.
func (c *Checker) Lost() {
	c.Next++
	c.Errors++
}

// Seek takes seq, the sequence number the next message says it has (a
// coalesced message's tag, say), as the one to check next. If it is not
// Next (messages were lost, repeated or reordered) it counts one error and
// returns it, and moves on to seq, so that one gap costs one error and the
// payload is checked against the message it claims to be.
func (c *Checker) Seek(seq uint64) error {
	if seq == c.Next {
		return nil
	}
	err := &Error{Kind: WrongSeq, Stream: c.Stream, Seq: c.Next, Got: seq, Want: c.Next}
	c.Errors++
	c.Next = seq
	return err
}
