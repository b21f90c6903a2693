package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/testpattern"
)

// --mode coalesce with --verify delivers every message SendMessage took to
// the receiver's OnMessage, in order and intact (the run fails otherwise),
// and accounts for every buffer by its flush cause.
func TestSweepCoalesceMode(t *testing.T) {
	r, progress := runSweepJSON(t, "--mode", "coalesce", "--verify", "--duration", "100ms")
	assert.Equal(t, modeCoalesce, r.Mode)
	require.Len(t, r.Rows, 1)
	row := r.Rows[0]
	assert.Equal(t, 64, row.Size, "64 B by default")
	assert.True(t, row.Verify)
	assert.Positive(t, row.Messages)
	assert.Equal(t, row.Sent, row.Messages, "every message taken arrived")
	assert.Equal(t, row.Messages*64, row.Bytes)
	assert.Positive(t, row.MsgsPerS)
	assert.Positive(t, row.MBPerS)
	assert.Positive(t, row.CPUSecPerGB)
	assert.Equal(t, defaultCoalesceBufSize, row.BufSize)
	assert.InDelta(t, 1000, row.FlushIntervalUs, 1e-9, "the endpoint's default, 1 ms")
	assert.Equal(t, 4, row.Window, "256 KiB of 64 KiB buffers in flight")
	assert.Equal(t, 8, row.RxBufs, "twice the window")
	assert.Positive(t, row.Buffers)
	assert.Equal(t, row.Buffers, row.FullFlushes+row.IntervalFlushes+row.ExplicitFlushes)
	assert.LessOrEqual(t, row.ExplicitFlushes, uint64(1), "only the final Flush is explicit")
	// A 64 KiB buffer holds at most 65536/(4+8+64) messages when every
	// message carries its own tag, as with --verify.
	assert.GreaterOrEqual(t, row.Buffers, row.Sent/(65536/76))
	assert.Contains(t, progress, "sweep: 64 B coalesced, 64 KiB buffers")
}

// The coalescing flags reach the endpoint: small buffers and a short flush
// interval, several sizes, one row each; the table shows the packing.
func TestSweepCoalesceFlags(t *testing.T) {
	r, _ := runSweepJSON(t, "--mode", "coalesce", "--sizes", "64,1000", "--buf-size", "4K",
		"--flush-interval", "200us", "--window", "8", "--rx-bufs", "16", "--duration", "100ms")
	require.Len(t, r.Rows, 2)
	for i, size := range []int{64, 1000} {
		row := r.Rows[i]
		assert.Equal(t, size, row.Size)
		assert.Equal(t, 4096, row.BufSize)
		assert.InDelta(t, 200, row.FlushIntervalUs, 1e-9)
		assert.Equal(t, 8, row.Window)
		assert.Equal(t, 16, row.RxBufs)
		assert.Equal(t, row.Sent, row.Messages)
		assert.Equal(t, row.Messages*uint64(size), row.Bytes)
		// Without --verify the tag never changes: only a buffer's first
		// message carries it.
		assert.GreaterOrEqual(t, row.Buffers, row.Sent/uint64((4096-8)/(4+size)))
	}

	table, _ := runSweepTable(t, "--mode", "coalesce", "--quick")
	assert.Contains(t, table, "msgs/buffer")
	assert.Regexp(t, `(?m)^\s+64 B\s+64 KiB\s+\d+`, table)
}

// A server and a client with --coalesce: the client packs 64 B messages
// with SendMessage, the server counts and verifies each one.
func TestServerClientCoalesce(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const count = 50000
	srv := startServer(t, ctx, "--coalesce", "--count", "50000", "--verify", "--json")

	var out, errOut bytes.Buffer
	code := run(ctx, []string{"client", "--connect", srv.addr, "--coalesce", "--count", "50000",
		"--buf-size", "8K", "--flush-interval", "500us", "--bufs", "16", "--verify", "--json"}, &out, &errOut)
	require.Equal(t, exitOK, code, "client: %s", errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c := decodeReport(t, lines[len(lines)-1])
	assert.Equal(t, "client", c.Role)
	assert.Equal(t, 64, c.Size, "64 B by default with --coalesce")
	assert.Equal(t, uint64(count), c.Messages)
	assert.Equal(t, uint64(count*64), c.Bytes)
	assert.GreaterOrEqual(t, c.Buffers, uint64(count/(8192/76)), "8 KiB buffers hold at most 107 tagged 64 B messages")
	assert.Zero(t, c.FailedSends)

	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, uint64(count), s.Messages, "messages, not buffers")
	assert.Equal(t, uint64(count*64), s.Bytes)
	assert.Zero(t, s.VerifyErrors)
	assert.Zero(t, s.ReceiveErrors)
}

// A coalescing client's buffers reach a server without --coalesce as
// whole messages, which fail its verification: both sides must agree on
// the format. With 8 KiB buffers, 76 B per message (each has a tag of its
// own with --verify) and a flush interval that never passes, 1000 messages
// make exactly 9 full buffers and the final flush.
func TestServerWithoutCoalesceSeesBuffers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--count", "10", "--verify", "--json")
	var out bytes.Buffer
	code := run(ctx, []string{"client", "--connect", srv.addr, "--coalesce", "--count", "1000", "--buf-size", "8K",
		"--flush-interval", "1h", "--verify", "--json"}, &out, io.Discard)
	require.Equal(t, exitOK, code)
	c := decodeReport(t, strings.TrimSpace(out.String()))
	assert.Equal(t, uint64(10), c.Buffers)

	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitFail, code, "verification errors")
	s := decodeReport(t, last)
	assert.Equal(t, uint64(10), s.Messages)
	assert.Equal(t, uint64(10), s.VerifyErrors)
}

func TestCoalesceWindow(t *testing.T) {
	assert.Equal(t, 4, coalesceWindow(64*kib))
	assert.Equal(t, 16, coalesceWindow(16*kib))
	assert.Equal(t, 4, coalesceWindow(mib), "never below 4")
	assert.Equal(t, 128, coalesceWindow(kib), "never above 128")
}

// The counter of the sweep's receiver: a gap in the tags is one error, a
// wrong payload another, a wrong size is counted apart, and check reports
// each kind.
func TestMessageCounterVerifies(t *testing.T) {
	pat := testpattern.New(64)
	c := newMessageCounter(64, pat)
	c.onMessage(nil, 0, pat.Bytes(0, 0, 64), 0)
	c.onMessage(nil, 1, pat.Bytes(0, 1, 64), 0)
	require.NoError(t, c.check())
	c.onMessage(nil, 3, pat.Bytes(0, 3, 64), 0) // message 2 lost
	c.onMessage(nil, 4, pat.Bytes(0, 4, 64), 0) // in sequence again
	assert.Equal(t, uint64(1), c.verifyErrors.Load(), "one gap, one error")
	c.onMessage(nil, 5, pat.Bytes(0, 6, 64), 0) // payload of another message
	assert.Equal(t, uint64(2), c.verifyErrors.Load())
	c.onMessage(nil, 6, pat.Bytes(0, 6, 32), 0) // truncated: a right prefix, the wrong size
	assert.Equal(t, uint64(1), c.wrongSize.Load())
	assert.Equal(t, uint64(6), c.received.Load())
	err := c.check()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 messages failed verification")
	assert.Contains(t, err.Error(), "1 messages arrived with a size other than 64")
}

// await returns once the target has arrived, also when the last message
// arrived before the target was set, and fails when messages are missing.
func TestMessageCounterAwait(t *testing.T) {
	c := newMessageCounter(8, nil)
	for range 3 {
		c.onMessage(nil, 0, make([]byte, 8), 0)
	}
	last, err := c.await(t.Context(), 3, time.Minute)
	require.NoError(t, err)
	assert.False(t, last.Before(c.base))

	c = newMessageCounter(8, nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.await(t.Context(), 2, time.Minute)
		done <- err
	}()
	c.onMessage(nil, 0, make([]byte, 8), 0)
	c.onMessage(nil, 0, make([]byte, 8), 0)
	assert.NoError(t, <-done)

	c = newMessageCounter(8, nil)
	c.onMessage(nil, 0, make([]byte, 8), 0)
	_, err = c.await(t.Context(), 2, time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only 1 of 2 messages arrived")
}

// The coalescing defaults: 64 B messages, 64 KiB buffers, the endpoint's
// flush interval, for the sweep and for the client.
func TestCoalesceFlagDefaults(t *testing.T) {
	o, err := parseSweepFlags([]string{"--mode", "coalesce"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{64}, o.sizes)
	assert.Equal(t, 64*kib, o.coalesce.bufSize)
	assert.Equal(t, time.Millisecond, o.coalesce.flushInterval)
	assert.False(t, o.verify)

	c, err := parseClientFlags([]string{"--connect", "127.0.0.1:1", "--coalesce"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 64, c.size)
	assert.Equal(t, 64*kib, c.coal.bufSize)
	c, err = parseClientFlags([]string{"--connect", "127.0.0.1:1", "--coalesce", "--size", "1K", "--buf-size", "2K"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, kib, c.size)
	assert.Equal(t, 2*kib, c.coal.bufSize)
	c, err = parseClientFlags([]string{"--connect", "127.0.0.1:1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 4096, c.size, "without --coalesce the default stays 4 KiB")
}

// Bad values of the coalescing flags, and the flags where they do not
// apply, exit with status 2 and the usage.
func TestCoalesceUsageErrors(t *testing.T) {
	client := []string{"client", "--connect", "127.0.0.1:1"}
	for _, args := range [][]string{
		{"--mode", "coalesce", "--buf-size", "0"},
		{"--mode", "coalesce", "--buf-size", "x"},
		{"--mode", "coalesce", "--buf-size", "32M"},
		{"--mode", "coalesce", "--sizes", "64K"}, // no room for the framing in a 64 KiB buffer
		{"--mode", "coalesce", "--sizes", "100", "--buf-size", "111"},
		{"--mode", "coalesce", "--flush-interval", "0s"},
		{"--mode", "coalesce", "--flush-interval", "-1ms"},
		{"--mode", "coalesce", "--flush-interval", "soon"},
		{"--mode", "coalesce", "--zero-copy"},
		{"--mode", "coalesce", "--conns", "4"},
		{"--buf-size", "4K"},            // only with --mode coalesce
		{"--flush-interval", "1ms"},     // only with --mode coalesce
		{"--mode", "scale", "--verify"}, // only with --mode coalesce
		append(client, "--buf-size", "4K"),
		append(client, "--flush-interval", "1ms"),
		append(client, "--coalesce", "--zero-copy"),
		append(client, "--coalesce", "--size", "4K", "--buf-size", "4K"),
		append(client, "--coalesce", "--flush-interval", "0"),
		{"server", "--coalesce=maybe"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "usage:", "%q", args)
		assert.Empty(t, out.String(), "%q", args)
	}
}
