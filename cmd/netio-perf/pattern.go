package main

import "bytes"

// patternMod is the modulus of the verification pattern: byte i of message k
// (k counted from 0 on each connection) is (k + i) % patternMod. A prime
// that is not a power of two makes shifted or repeated data show up.
const patternMod = 251

// pattern holds (j % patternMod) for j in 0..max+patternMod-1, so that the
// expected content of message k is one slice of it: filling is a copy and
// checking a bytes.Equal, with no per-byte arithmetic on the hot path.
type pattern []byte

// newPattern returns a pattern for messages of up to max bytes.
func newPattern(max int) pattern {
	p := make(pattern, max+patternMod)
	for j := range p {
		p[j] = byte(j % patternMod)
	}
	return p
}

// maxLen returns the longest message the pattern covers.
func (p pattern) maxLen() int { return len(p) - patternMod }

// message returns the expected first n bytes of message k; n must not
// exceed maxLen.
func (p pattern) message(k uint64, n int) []byte {
	off := int(k % patternMod)
	return p[off : off+n]
}

// fill writes the content of message k into dst (all of it).
func (p pattern) fill(dst []byte, k uint64) {
	copy(dst, p.message(k, len(dst)))
}

// check reports whether data is exactly the content of message k. Data
// longer than the pattern covers never matches.
func (p pattern) check(data []byte, k uint64) bool {
	return len(data) <= p.maxLen() && bytes.Equal(data, p.message(k, len(data)))
}

// verifier checks the messages of one connection in order: the k-th message
// it sees must carry the pattern of message k. A lost, repeated or
// reordered message therefore counts as an error, as does corrupted
// content.
type verifier struct {
	pat    pattern
	next   uint64 // index of the next expected message
	errors uint64 // messages that did not match
}

// observe checks data as the next message of the connection and reports
// whether it matched.
func (v *verifier) observe(data []byte) bool {
	ok := v.pat.check(data, v.next)
	v.next++
	if !ok {
		v.errors++
	}
	return ok
}
