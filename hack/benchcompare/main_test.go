package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "tcp", c.provider)
	assert.Equal(t, 3, c.rounds)
	assert.Equal(t, []int{64, 1 << 10, 4 << 10, 64 << 10, 1 << 20}, c.sizes)
	assert.Equal(t, time.Second, c.duration)
	assert.Equal(t, 4096, c.scaleSize)
	assert.Equal(t, []int{1, 4, 16, 64}, c.conns)
	assert.Equal(t, "bench-compare.json", c.jsonPath)
	assert.Equal(t, "busy", c.busyPoll)
}

func TestParseConfigFlags(t *testing.T) {
	c, err := parseConfig([]string{"--provider", "sockets", "--rounds", "5", "--sizes", "4K, 1M",
		"--duration", "500ms", "--conns", "2,8", "--scale-size", "64K", "--json", "x.json", "--busy-poll", "busy-locked"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "sockets", c.provider)
	assert.Equal(t, 5, c.rounds)
	assert.Equal(t, []int{4096, 1 << 20}, c.sizes)
	assert.Equal(t, []int{2, 8}, c.conns)
	assert.Equal(t, 64<<10, c.scaleSize)
	assert.Equal(t, "x.json", c.jsonPath)
	assert.Equal(t, "busy-locked", c.busyPoll)
}

// TestUsageErrors checks that bad command lines exit with status 2 before
// anything runs, and say what is wrong.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--provider", "verbs"}, "--provider"},
		{[]string{"--rounds", "0"}, "--rounds"},
		{[]string{"--sizes", "64,x"}, "--sizes"},
		{[]string{"--sizes", "0"}, "--sizes"},
		{[]string{"--sizes", "128M"}, "--sizes"},
		{[]string{"--conns", "1,0"}, "--conns"},
		{[]string{"--conns", "1000"}, "--conns"},
		{[]string{"--duration", "1ms"}, "--duration"},
		{[]string{"--timeout", "2s"}, "--timeout"},
		{[]string{"--json", ""}, "--json"},
		{[]string{"--busy-poll", "adaptive"}, "--busy-poll"},
		{[]string{"--bogus"}, "bogus"},
		{[]string{"extra"}, "extra"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, run(t.Context(), c.args, &out, &errOut), "%q", c.args)
		assert.Contains(t, errOut.String(), c.says, "%q", c.args)
		assert.Empty(t, out.String(), "%q", c.args)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"64": 64, "4K": 4096, "1M": 1 << 20, "64M": 64 << 20} {
		got, err := parseSize(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5K", "4k", "65M", "1G"} {
		_, err := parseSize(in)
		assert.Error(t, err, in)
	}
}

func TestWindowForMatchesNetioPerf(t *testing.T) {
	assert.Equal(t, window{Send: 128, Receive: 256}, windowFor(64))
	assert.Equal(t, window{Send: 128, Receive: 256}, windowFor(64<<10))
	assert.Equal(t, window{Send: 64, Receive: 128}, windowFor(128<<10))
	assert.Equal(t, window{Send: 16, Receive: 32}, windowFor(1<<20))
}
