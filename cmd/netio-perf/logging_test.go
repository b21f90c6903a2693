package main

import (
	"bytes"
	"flag"
	"io"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogLevelFlag(t *testing.T) {
	var l logLevel
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	l.register(fs)
	assert.Equal(t, "disabled", l.String(), "quiet by default")
	for in, want := range map[string]zerolog.Level{"trace": zerolog.TraceLevel, "debug": zerolog.DebugLevel,
		"info": zerolog.InfoLevel, "warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel, "disabled": zerolog.Disabled} {
		require.NoError(t, l.Set(in), in)
		assert.Equal(t, want, zerolog.Level(l), in)
	}
	before := l
	for _, in := range []string{"", "loud", "DEBUGGING"} {
		assert.Error(t, l.Set(in), in)
		assert.Equal(t, before, l, "a bad value changes nothing: %q", in)
	}
}

// The logger writes from its level on, and nothing at the default.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	c := commonFlags{logLevel: logLevel(zerolog.Disabled)}
	log := c.logger(&buf)
	log.Error().Msg("never")
	assert.Empty(t, buf.String())

	c.logLevel = logLevel(zerolog.InfoLevel)
	log = c.logger(&buf)
	log.Debug().Msg("below the level")
	log.Info().Str("peer", "127.0.0.1:7000").Msg("connection closed")
	assert.NotContains(t, buf.String(), "below the level")
	assert.Contains(t, buf.String(), "INF connection closed peer=127.0.0.1:7000")

	// publish and subscribe: --log alone means debug; an explicit level wins.
	buf.Reset()
	c.logLevel = logLevel(zerolog.Disabled)
	log = c.roleLogger(&buf, "publish", true)
	log.Debug().Msg("subscribed")
	assert.Contains(t, buf.String(), "DBG subscribed role=publish")
	buf.Reset()
	log = c.roleLogger(&buf, "publish", false)
	log.Error().Msg("quiet")
	assert.Empty(t, buf.String())
	c.logLevel = logLevel(zerolog.WarnLevel)
	log = c.roleLogger(&buf, "subscribe", true)
	log.Debug().Msg("below warn")
	assert.Empty(t, buf.String())
}

// --log-level reaches the library through domain.Config: the manager logs
// "domain opened" at debug level, and passes the logger on to what it
// opens; in every mode (streaming and ping-pong),
// and nothing by default.
func TestLogLevelReachesTheLibrary(t *testing.T) {
	for _, args := range [][]string{
		{"--quick", "--sizes", "64"},
		{"server", "--count", "1", "--timeout", "10ms"},
		{"client", "--connect", "127.0.0.1:1", "--timeout", "2s"},
		{"server", "--mode", "pingpong", "--timeout", "10ms"},
		{"client", "--mode", "pingpong", "--connect", "127.0.0.1:1", "--timeout", "2s"},
	} {
		var quiet, loud lockedBuffer // the library logs from its pollers' goroutines
		run(t.Context(), args, io.Discard, &quiet)
		assert.NotContains(t, quiet.String(), "domain opened", "%q", args)
		run(t.Context(), append(args, "--log-level", "debug"), io.Discard, &loud)
		assert.Contains(t, loud.String(), "DBG domain opened", "%q", args)
		assert.Contains(t, loud.String(), "provider=tcp", "%q", args)
	}
	// The manager hands the logger on: the sweep's listeners and senders
	// log their connections with the peer's address, at info not at all.
	var debug, info lockedBuffer
	require.Equal(t, exitOK, run(t.Context(), []string{"--quick", "--sizes", "64", "--log-level", "debug"}, io.Discard, &debug))
	assert.Contains(t, debug.String(), "DBG connection established")
	assert.Regexp(t, `connection closed .*peer=127\.0\.0\.1:\d+`, debug.String())
	require.Equal(t, exitOK, run(t.Context(), []string{"--quick", "--sizes", "64", "--log-level", "info"}, io.Discard, &info))
	assert.NotContains(t, info.String(), "connection established")

	var out, errOut bytes.Buffer
	assert.Equal(t, exitUsage, run(t.Context(), []string{"server", "--log-level", "loud"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-log-level")
}
