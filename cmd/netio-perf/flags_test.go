package main

import (
	"bytes"
	"io"
	"testing"
	"time"

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

func TestParseCounts(t *testing.T) {
	got, err := parseCounts("1, 4,16,64", 64)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 4, 16, 64}, got)
	for _, in := range []string{"", "0", "65", "x", "1,,2", "-1"} {
		_, err := parseCounts(in, 64)
		assert.Error(t, err, in)
	}
}

// The sweep's defaults depend on the mode: five sizes for the sweep, 4 KiB
// and 1, 4, 16, 64 connections for --mode scale.
func TestSweepFlagDefaults(t *testing.T) {
	o, err := parseSweepFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{64, kib, 4 * kib, 64 * kib, mib}, o.sizes)
	assert.Zero(t, o.window)
	o, err = parseSweepFlags([]string{"--mode", "scale"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{4 * kib}, o.sizes)
	assert.Equal(t, []int{1, 4, 16, 64}, o.conns)
	o, err = parseSweepFlags([]string{"--mode", "scale", "--conns", "2,8", "--sizes", "1K", "--window", "8", "--rx-bufs", "16", "--duration", "300ms"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 8}, o.conns)
	assert.Equal(t, []int{kib}, o.sizes)
	assert.Equal(t, 8, o.window)
	assert.Equal(t, 16, o.rxBufs)
	assert.Equal(t, 300*time.Millisecond, o.duration)
}

func TestWindows(t *testing.T) {
	w := sweeper{}
	send, recv := w.windows(128)
	assert.Equal(t, 128, send)
	assert.Equal(t, 256, recv)
	w = sweeper{window: 200}
	send, recv = w.windows(16)
	assert.Equal(t, 200, send)
	assert.Equal(t, maxPostedReceives, recv, "twice the window, capped at the queue depth")
	w = sweeper{window: 8, rxBufs: 12}
	send, recv = w.windows(16)
	assert.Equal(t, 8, send)
	assert.Equal(t, 12, recv)

	assert.Equal(t, 128, scaleWindow(4*kib, 1))
	assert.Equal(t, 128, scaleWindow(4*kib, 16))
	assert.Equal(t, 64, scaleWindow(4*kib, 32))
	assert.Equal(t, 32, scaleWindow(4*kib, 64))
	assert.Equal(t, 8, scaleWindow(4*kib, 256))
	assert.Equal(t, 16, scaleWindow(mib, 4))
	assert.Equal(t, 4, scaleWindow(64, 1000), "never below 4")
}

func TestCPUPerGB(t *testing.T) {
	assert.Zero(t, cpuPerGB(time.Second, 0))
	assert.InDelta(t, 0.5, cpuPerGB(time.Second, 2e9), 1e-12)
	r := sweepRow{Bytes: 4e9}
	r.setCPU(2 * time.Second)
	assert.InDelta(t, 2.0, r.CPUSeconds, 1e-12)
	assert.InDelta(t, 0.5, r.CPUSecPerGB, 1e-12)
	before := cpuTime()
	assert.Positive(t, before, "a running test has used CPU")
	assert.GreaterOrEqual(t, cpuTime(), before)
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
		{"--mode", "scale", "--conns", "1,0"},
		{"--mode", "scale", "--conns", "1000"},
		{"--conns", "4"}, // only with --mode scale
		{"--mode", "scale", "--zero-copy"},
		{"--window", "-1"},
		{"--window", "257"},
		{"--rx-bufs", "1000"},
		{"--duration", "-1s"},
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
