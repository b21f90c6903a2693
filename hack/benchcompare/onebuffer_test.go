package main

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneBufferRow is what a cbaseline bw line says about --one-buffer.
type oneBufferRow struct {
	Role      string  `json:"role"`
	OneBuffer bool    `json:"one_buffer"`
	Messages  uint64  `json:"messages"`
	MBPerS    float64 `json:"mb_per_s"`
}

// TestCBaselineOneBuffer runs cbaseline bw with --one-buffer (fabtests'
// footprint, hack/footprint-ab.sh) in one process and in two: every message
// arrives, and the lines say the run used one buffer; without the flag they
// do not. The flag is refused outside bw.
func TestCBaselineOneBuffer(t *testing.T) {
	bin := buildCBaseline(t)
	tl := tools{provider: "tcp", timeout: 30 * time.Second}

	for _, one := range []bool{true, false} {
		args := []string{"bw", "--provider", "tcp", "--size", "65536", "--seconds", "0.1"}
		if one {
			args = append(args, "--one-buffer")
		}
		var row oneBufferRow
		require.NoError(t, tl.runJSON(t.Context(), &row, bin, args...))
		assert.Equal(t, one, row.OneBuffer)
		assert.Positive(t, row.Messages)
		assert.Positive(t, row.MBPerS)
	}

	const count = 2000
	n := strconv.Itoa(count)
	o, err := tl.runPair(t.Context(), pairSpec{
		server: command{bin, []string{"bw", "--provider", "tcp", "--size", "65536", "--rx-depth", "64",
			"--max-count", n, "--listen", "127.0.0.1:0", "--timeout", "30", "--one-buffer"}},
		client: func(addr string) command {
			return command{bin, []string{"bw", "--provider", "tcp", "--size", "65536", "--window", "64",
				"--max-count", n, "--connect", addr, "--timeout", "30", "--one-buffer"}}
		}})
	require.NoError(t, err)
	for side, out := range map[string][]byte{"server": o.server, "client": o.client} {
		var row oneBufferRow
		require.NoError(t, unmarshalLastLine(out, &row), side)
		assert.Equal(t, side, row.Role)
		assert.True(t, row.OneBuffer, side)
		assert.Equal(t, uint64(count), row.Messages, side)
	}

	out, err := exec.Command(bin, "pingpong", "--provider", "tcp", "--size", "64", "--one-buffer").CombinedOutput()
	assert.Error(t, err)
	assert.Contains(t, string(out), "--one-buffer: bw only")
}
