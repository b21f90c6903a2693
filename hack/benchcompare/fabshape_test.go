package main

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fabShapeRow is what a cbaseline bw line says about --one-buffer and
// --batch.
type fabShapeRow struct {
	Role      string  `json:"role"`
	OneBuffer bool    `json:"one_buffer"`
	Batch     bool    `json:"batch"`
	Messages  uint64  `json:"messages"`
	MBPerS    float64 `json:"mb_per_s"`
}

// TestCBaselineFabtestsShape runs cbaseline bw with fabtests' footprint
// (--one-buffer) and rhythm (--batch), each and both, in one process and in
// two (hack/footprint-ab.sh): every message arrives, and the lines say which
// shape ran; without the flags they say neither. Other modes refuse them.
func TestCBaselineFabtestsShape(t *testing.T) {
	bin := buildCBaseline(t)
	tl := tools{provider: "tcp", timeout: 30 * time.Second}
	const count = 2000
	n := strconv.Itoa(count)

	for _, flags := range [][]string{nil, {"--one-buffer"}, {"--batch"}, {"--batch", "--one-buffer"}} {
		name := strings.Join(flags, " ")
		one, batch := slices.Contains(flags, "--one-buffer"), slices.Contains(flags, "--batch")

		var row fabShapeRow
		args := append([]string{"bw", "--provider", "tcp", "--size", "65536", "--seconds", "0.1"}, flags...)
		require.NoError(t, tl.runJSON(t.Context(), &row, bin, args...), name)
		assert.Equal(t, one, row.OneBuffer, name)
		assert.Equal(t, batch, row.Batch, name)
		assert.Positive(t, row.Messages, name)
		assert.Positive(t, row.MBPerS, name)

		o, err := tl.runPair(t.Context(), pairSpec{
			server: command{bin, append([]string{"bw", "--provider", "tcp", "--size", "65536", "--rx-depth", "64",
				"--max-count", n, "--listen", "127.0.0.1:0", "--timeout", "30"}, flags...)},
			client: func(addr string) command {
				return command{bin, append([]string{"bw", "--provider", "tcp", "--size", "65536", "--window", "64",
					"--max-count", n, "--connect", addr, "--timeout", "30"}, flags...)}
			}})
		require.NoError(t, err, name)
		for side, out := range map[string][]byte{"server": o.server, "client": o.client} {
			var row fabShapeRow
			require.NoError(t, unmarshalLastLine(out, &row), "%s %s", name, side)
			assert.Equal(t, side, row.Role, name)
			assert.Equal(t, one, row.OneBuffer, "%s %s", name, side)
			assert.Equal(t, batch, row.Batch, "%s %s", name, side)
			assert.Equal(t, uint64(count), row.Messages, "%s %s", name, side)
		}
	}

	for _, flag := range []string{"--one-buffer", "--batch"} {
		out, err := exec.Command(bin, "pingpong", "--provider", "tcp", "--size", "64", flag).CombinedOutput()
		assert.Error(t, err, flag)
		assert.Contains(t, string(out), flag+": bw only")
	}
}
