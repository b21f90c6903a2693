package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPatternMatchesFormula checks fill against the definition: byte i of
// message k is (k + i) % 251, also past the modulus in both k and i.
func TestPatternMatchesFormula(t *testing.T) {
	p := newPattern(1000)
	for _, k := range []uint64{0, 1, 250, 251, 252, 1 << 40} {
		buf := make([]byte, 1000)
		p.fill(buf, k)
		for i, b := range buf {
			if !assert.Equal(t, byte((k+uint64(i))%251), b, "message %d byte %d", k, i) {
				break
			}
		}
		assert.True(t, p.check(buf, k), "message %d", k)
	}
}

// TestVerifierCountsCorruption feeds a connection's messages through a
// verifier: a corrupted byte, a lost message and a message longer than the
// pattern are each counted.
func TestVerifierCountsCorruption(t *testing.T) {
	p := newPattern(64)
	msg := func(k uint64) []byte {
		b := make([]byte, 64)
		p.fill(b, k)
		return b
	}
	v := verifier{pat: p}
	for k := range uint64(300) {
		require.True(t, v.observe(msg(k)), "clean message %d", k)
	}
	require.Zero(t, v.errors)

	bad := msg(300)
	bad[17] ^= 0x01
	assert.False(t, v.observe(bad), "corrupted byte")
	assert.Equal(t, uint64(1), v.errors)

	// Message 301 is lost: 302 arrives where 301 is expected.
	assert.False(t, v.observe(msg(302)), "lost message")
	assert.Equal(t, uint64(2), v.errors)

	assert.False(t, v.observe(make([]byte, 65)), "longer than the pattern")
	assert.Equal(t, uint64(3), v.errors)
	assert.Equal(t, uint64(303), v.next)
}

// TestPatternEmptyAndShortMessages checks that any prefix of the right
// message matches and an empty message matches trivially.
func TestPatternEmptyAndShortMessages(t *testing.T) {
	p := newPattern(16)
	assert.True(t, p.check(nil, 7))
	assert.True(t, p.check([]byte{7, 8, 9}, 7))
	assert.False(t, p.check([]byte{7, 8, 9}, 8))
}
