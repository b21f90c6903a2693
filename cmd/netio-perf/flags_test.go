package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"64": 64, "4K": 4096, "4kib": 4096, "1M": mib, "1MiB": mib, "64B": 64, " 2 K ": 2048, "1G": gib} {
		got, err := parseSize(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "0", "-1", "x", "4X", "2G", "1.5K"} {
		_, err := parseSize(in)
		assert.Error(t, err, in)
	}
	sizes, err := parseSizes("64,1K,1M")
	require.NoError(t, err)
	assert.Equal(t, []int{64, kib, mib}, sizes)
}

func TestFormatSize(t *testing.T) {
	assert.Equal(t, "64 B", formatSize(64))
	assert.Equal(t, "1 KiB", formatSize(kib))
	assert.Equal(t, "64 KiB", formatSize(64*kib))
	assert.Equal(t, "1 MiB", formatSize(mib))
	assert.Equal(t, "1500 B", formatSize(1500))
}

func TestParseHostPort(t *testing.T) {
	a, err := parseHostPort("127.0.0.1:0", true)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:0", a.String())
	a, err = parseHostPort("localhost:7000", false)
	require.NoError(t, err)
	assert.Equal(t, hostPort{IP: "127.0.0.1", Port: 7000}, a)
	for _, in := range []string{"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "host:1", ":1", "127.0.0.1:x"} {
		_, err := parseHostPort(in, false)
		assert.Error(t, err, in)
	}
}

func TestRatesNeverInfinite(t *testing.T) {
	mb, msgs := rates(10, 1e6, 0)
	assert.Zero(t, mb)
	assert.Zero(t, msgs)
	mb, msgs = rates(10, 2e6, 2e9)
	assert.InDelta(t, 1.0, mb, 1e-9)
	assert.InDelta(t, 5.0, msgs, 1e-9)
}

// TestUsageErrors checks that bad command lines exit with status 2 and say
// why, before anything is opened.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"frob"},
		{"--bogus"},
		{"server", "--listen", "nowhere"},
		{"server", "--listen", "host:1"},
		{"server", "--bufs", "0"},
		{"server", "extra"},
		{"client"},
		{"client", "--connect", "127.0.0.1:0"},
		{"client", "--connect", "127.0.0.1:1", "--size", "0"},
		{"client", "--connect", "127.0.0.1:1", "--timeout", "-1s"},
		{"--sizes", "64,x"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "usage:", "%q", args)
		assert.Empty(t, out.String(), "%q", args)
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"server", "-h"}, {"client", "--help"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitOK, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "usage:", "%q", args)
	}
}
