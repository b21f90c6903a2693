package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decodePingPong(t *testing.T, line string) pingPongReport {
	t.Helper()
	var r pingPongReport
	require.NoError(t, json.Unmarshal([]byte(line), &r), "line %q", line)
	return r
}

// TestPingPongTwoSides runs server and client --mode pingpong against each
// other: the client times exactly --iterations round trips, the server
// echoed those and the warm-up ones, and the latencies are ordered.
func TestPingPongTwoSides(t *testing.T) {
	for _, poll := range []string{"adaptive", "busy", "busy-locked"} {
		t.Run(poll, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			srv := startServer(t, ctx, "--mode", "pingpong", "--buf-size", "4K", "--poll", poll, "--json")
			var out, errOut bytes.Buffer
			code := run(ctx, []string{"client", "--mode", "pingpong", "--connect", srv.addr, "--size", "64",
				"--iterations", "300", "--poll", poll, "--json"}, &out, &errOut)
			require.Equal(t, exitOK, code, "client: %s", errOut.String())
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			c := decodePingPong(t, lines[len(lines)-1])
			assert.Equal(t, "client", c.Role)
			assert.Equal(t, modePingPong, c.Mode)
			assert.Equal(t, 64, c.Size)
			assert.Equal(t, 300, c.RoundTrips)
			assert.Positive(t, c.LatP50us)
			assert.GreaterOrEqual(t, c.LatP99us, c.LatP50us)
			assert.Positive(t, c.LatMeanus)

			code, last := srv.wait(t, ctx)
			assert.Equal(t, exitOK, code)
			s := decodePingPong(t, last)
			assert.Equal(t, "server", s.Role)
			assert.Equal(t, 300+pingPongWarmup, s.RoundTrips, "every timed and warm-up ping echoed")
		})
	}
}

// TestPingPongServerRefusesStream: a client streaming messages at a
// ping-pong server sends no hello; the server says so and fails.
func TestPingPongServerRefusesStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--mode", "pingpong", "--buf-size", "4K", "--json")
	go func() {
		_ = run(ctx, []string{"client", "--connect", srv.addr, "--size", "64", "--count", "20"}, io.Discard, io.Discard)
	}()
	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitFail, code)
	assert.Zero(t, decodePingPong(t, last).RoundTrips)
}

// TestPingPongClientRefused: a server that refuses the client (pings
// larger than its --buf-size, or a hello truncated by a tiny --buf-size)
// closes the connection, and the client exits with that reason rather than
// waiting out its --timeout.
func TestPingPongClientRefused(t *testing.T) {
	for name, c := range map[string]struct{ serverBuf, size string }{
		"pings too large": {serverBuf: "4K", size: "8K"},
		"hello truncated": {serverBuf: "16", size: "64"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			srv := startServer(t, ctx, "--mode", "pingpong", "--buf-size", c.serverBuf, "--json")
			var out, errOut bytes.Buffer
			code := run(ctx, []string{"client", "--mode", "pingpong", "--connect", srv.addr, "--size", c.size,
				"--timeout", "50s"}, &out, &errOut)
			assert.Equal(t, exitFail, code)
			assert.Contains(t, errOut.String(), "the server ended the connection", "not the timeout")
			assert.NotContains(t, errOut.String(), "timeout after")

			code, last := srv.wait(t, ctx)
			assert.Equal(t, exitFail, code)
			assert.Zero(t, decodePingPong(t, last).RoundTrips)
		})
	}
}

func TestParseHello(t *testing.T) {
	for _, size := range []int{0, 1, 64, maxHelloSize} {
		got, err := parseHello(hello(size))
		require.NoError(t, err)
		assert.Equal(t, size, got)
	}
	for _, in := range []string{"", "hello", helloPrefix, helloPrefix + "-1", helloPrefix + "+1", helloPrefix + "064",
		helloPrefix + "1073741825", helloPrefix + "1 ", helloPrefix + "99999999999999999999",
		"netio-perf pingpong 1 127.0.0.1:1", strings.Repeat("x", 5000)} {
		_, err := parseHello([]byte(in))
		assert.True(t, errors.Is(err, errHello), "%q: %v", in, err)
	}
}

// FuzzParseHello: the hello is parsed off the wire. It is refused with
// errHello or names a size in range that is written back to the same
// message.
func FuzzParseHello(f *testing.F) {
	for _, s := range []string{helloPrefix + "64", helloPrefix + "0", helloPrefix, "", "x", helloPrefix + "1073741825", helloPrefix + "007"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		size, err := parseHello(msg)
		if err != nil {
			if !errors.Is(err, errHello) {
				t.Fatalf("parseHello(%q): %v does not match errHello", msg, err)
			}
			return
		}
		if size < 0 || size > maxHelloSize {
			t.Fatalf("parseHello(%q) = %d: out of range", msg, size)
		}
		if !bytes.Equal(hello(size), msg) {
			t.Errorf("parseHello(%q) = %d, whose hello is %q", msg, size, hello(size))
		}
	})
}

// The fabtests names are aliases: --window sets --bufs, --iterations sets
// --count, on both sides.
func TestPeerFlagAliases(t *testing.T) {
	c, err := parseClientFlags([]string{"--connect", "127.0.0.1:1", "--window", "7", "--iterations", "123"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 7, c.bufs)
	assert.Equal(t, uint64(123), c.count)
	assert.Equal(t, modeSend, c.peer.mode)
	s, err := parseServerFlags([]string{"--window", "9", "--iterations", "55"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 9, s.bufs)
	assert.Equal(t, uint64(55), s.count)
	c, err = parseClientFlags([]string{"--connect", "127.0.0.1:1", "--mode", "pingpong"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, modePingPong, c.peer.mode)
}

func TestPingPongUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"server", "--mode", "bw"},
		{"server", "--mode", "pingpong", "--verify"},
		{"server", "--mode", "pingpong", "--iterations", "5"},
		{"server", "--window", "0"},
		{"client", "--connect", "127.0.0.1:1", "--mode", "pingpong", "--count", "0"},
		{"client", "--connect", "127.0.0.1:1", "--mode", "pingpong", "--iterations", "20000000"},
		{"client", "--connect", "127.0.0.1:1", "--mode", "pingpong", "--zero-copy"},
		{"client", "--connect", "127.0.0.1:1", "--mode", "pingpong", "--coalesce"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "usage:", "%q", args)
		assert.Empty(t, out.String(), "%q", args)
	}
}
