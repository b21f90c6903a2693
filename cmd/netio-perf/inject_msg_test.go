package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientInjectMsg: client --inject on a connected endpoint
// (SendConfig.Inject) delivers every 64 B message with its pattern, and
// reports none failed.
func TestClientInjectMsg(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const count = 20000
	srv := startServer(t, ctx, "--count", "20000", "--buf-size", "64", "--verify", "--json")

	var out, errOut bytes.Buffer
	code := run(ctx, []string{"client", "--inject", "--connect", srv.addr, "--size", "64", "--count", "20000", "--verify", "--json"}, &out, &errOut)
	require.Equal(t, exitOK, code, "client: %s", errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c := decodeReport(t, lines[len(lines)-1])
	assert.Equal(t, uint64(count), c.Messages)
	assert.Zero(t, c.FailedSends)

	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, uint64(count), s.Messages)
	assert.Zero(t, s.VerifyErrors)
}
