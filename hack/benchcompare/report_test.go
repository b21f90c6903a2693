package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testReport is a report over a handful of samples: netio-go twice as fast
// as C at 64 B, C's 64 KiB bandwidth failed, raw Go at 64 KiB
// 2500 MB/s, no coalesced mode.
func testReport(t *testing.T) *report {
	t.Helper()
	c := config{provider: "tcp", rounds: 1, sizes: []int{64, 64 << 10}, duration: time.Second, scaleSize: 4096, conns: []int{1, 4}, oneProcess: true}
	b := newBench(c, &bytes.Buffer{})
	b.record(1, implNetio, nil, 0, []sample{bw(0, implNetio, 64, 40), pp(0, implNetio, 64, 6)}, nil)
	b.record(1, implC, nil, 0, []sample{bw(0, implC, 64, 20), pp(0, implC, 64, 5)}, nil)
	b.record(1, implNetio, nil, 0, []sample{bw(0, implNetio, 64<<10, 2000)}, nil)
	b.record(1, implC, []string{modeBandwidth, modePingPong}, 64<<10, nil, assert.AnError)
	b.record(1, implRawGo, nil, 0, []sample{bw(0, implRawGo, 64<<10, 2500)}, nil)
	b.record(1, implNetio, nil, 0, []sample{{Impl: implNetio, Mode: modeScale, Size: 4096, Connections: 4, MBPerS: 500, MsgsPerS: 122070, CPUSecPerGB: 1.5}}, nil)
	b.record(1, implNetio, nil, 0, []sample{{Impl: implNetio, Mode: modeCoalesced, Size: 64, NotBuilt: true}}, nil)
	return b.report(time.Now())
}

func TestRecordKeepsRoundAndFailures(t *testing.T) {
	r := testReport(t)
	assert.Equal(t, 1, r.Failures)
	var failed []string
	for _, s := range r.Samples {
		assert.Equal(t, 1, s.Round, "%+v", s)
		if s.Error != "" {
			failed = append(failed, s.Impl+"/"+s.Mode)
			assert.Equal(t, 64<<10, s.Size)
		}
	}
	assert.Equal(t, []string{"c-libfabric/bandwidth", "c-libfabric/pingpong"}, failed)
}

// A run that reports success but no figures counts as a failure and does
// not pull the median down.
func TestRecordRejectsEmptySamples(t *testing.T) {
	b := newBench(config{rounds: 1}, &bytes.Buffer{})
	b.record(2, implC, nil, 0, []sample{
		{Impl: implC, Mode: modePingPong, Size: 64},
		{Impl: implC, Mode: modeBandwidth, Size: 64},
		pp(0, implNetio, 64, 6),
	}, nil)
	assert.Equal(t, 2, b.failures)
	require.Len(t, b.samples, 3)
	assert.Equal(t, "nothing measured", b.samples[0].Error)
	assert.Equal(t, "nothing measured", b.samples[1].Error)
	assert.True(t, b.samples[2].ok())
	assert.Equal(t, 2, b.samples[2].Round)
}

func TestJSONShape(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bc.json")
	require.NoError(t, writeJSON(path, testReport(t)))
	data, err := os.ReadFile(path)
	require.NoError(t, err)

	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	for _, k := range []string{"started", "wall_seconds", "machine", "provider", "rounds", "duration_s", "sizes",
		"scale_size", "scale_conns", "windows", "samples", "summary", "coalesced", "scale", "raw_go", "spread", "failures"} {
		assert.Contains(t, doc, k)
	}
	assert.Equal(t, map[string]any{"status": "not built"}, doc["coalesced"])
	for _, k := range []string{"host", "cpus", "cpu_model", "kernel", "go", "libfabric", "load_start", "load_end"} {
		assert.Contains(t, doc["machine"], k)
	}
	assert.Equal(t, map[string]any{"send": 128.0, "receive": 256.0}, doc["windows"].(map[string]any)["64"])

	samples := doc["samples"].([]any)
	first := samples[0].(map[string]any)
	assert.Equal(t, map[string]any{"round": 1.0, "impl": "netio-go", "mode": "bandwidth", "size": 64.0,
		"mb_per_s": 40.0, "msgs_per_s": 625000.0, "cpu_s_per_gb": 1.0}, first)

	summary := doc["summary"].([]any)
	require.Len(t, summary, len(metrics))
	mb := summary[0].(map[string]any)
	assert.Equal(t, "mb_per_s", mb["metric"])
	row := mb["rows"].([]any)[0].(map[string]any)
	assert.Equal(t, 64.0, row["size"])
	assert.Equal(t, map[string]any{"c-libfabric": 2.0}, row["netio_ratio"])
	assert.Equal(t, map[string]any{"netio-go": 40.0, "c-libfabric": 20.0}, row["median"])
	assert.NotContains(t, row["median"], implRawGo, "raw Go is no column of the tables")
	assert.Equal(t, []any{map[string]any{"size": 65536.0, "rounds": 1.0, "mb_per_s": 2500.0, "cpu_s_per_gb": 1.0, "netio_over": 0.8}},
		doc["raw_go"], "no ratio to C, whose 64 KiB run failed")
	assert.Equal(t, []any{map[string]any{"size": 64.0, "netio_mb_per_s": map[string]any{"min": 40.0, "max": 40.0},
		"c_mb_per_s": map[string]any{"min": 20.0, "max": 20.0}, "ratios_by_round": []any{2.0}}},
		doc["spread"], "no 64 KiB row: C's run failed")
}

func TestPrintReport(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printReport(&out, testReport(t)))
	text := out.String()
	assert.Contains(t, text, "coalesced 64 B msg/s (netio-go): n/a (not built)")
	lines := strings.Split(text, "\n")
	bwRow := fieldsOf(lines, "bandwidth, MB/s", "64 B")
	// size(2) netio C C+yield TCP bufio, then netio over each of the four
	require.Len(t, bwRow, 11, "%q", bwRow)
	assert.Equal(t, []string{"40.0", "20.0", "failed", "failed", "failed", "2.00", "-", "-", "-"}, bwRow[2:])
	assert.Equal(t, []string{"2000.0", "failed"}, fieldsOf(lines, "bandwidth, MB/s", "64 KiB")[2:4])
	assert.Equal(t, []string{"64", "B", "40-40", "20-20", "2.00"}, fieldsOf(lines, "bandwidth over the rounds", "64 B"))
	spread := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "bandwidth over the rounds") })
	require.Positive(t, spread)
	assert.Empty(t, lines[spread+3], "one spread row (64 B), none at 64 KiB where C failed: %q", lines[spread:spread+4])
	assert.Equal(t, []string{"64", "KiB", "2500.0", "1.000", "-", "0.80", "1"}, fieldsOf(lines, "raw Go, MB/s", "64 KiB"))
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "raw Go, MB/s") })
	require.Positive(t, at)
	assert.Empty(t, lines[at+3], "one raw Go row (64 KiB), none at 64 B: %q", lines[at:at+4])
	latRow := fieldsOf(lines, "ping-pong one-way", "64 B")
	assert.Equal(t, []string{"6.0", "5.0"}, latRow[2:4])
	assert.Equal(t, "1.20", latRow[7])
	scale := fieldsOf(lines, "scaling:", "4")
	assert.Equal(t, []string{"4", "500.0", "0.1221", "1.500", "1"}, scale)
	assert.Equal(t, []string{"1", "failed", "0"}, fieldsOf(lines, "scaling:", "1"))
}

// With no C round and no raw Go round there is nothing to put under the
// bandwidth table: neither table is printed, not even its heading.
func TestPrintReportWithoutSpreadOrRawGo(t *testing.T) {
	b := newBench(config{provider: "sockets", rounds: 1, sizes: []int{64}, duration: time.Second, oneProcess: true}, &bytes.Buffer{})
	b.record(1, implNetio, nil, 0, []sample{bw(0, implNetio, 64, 40)}, nil)
	r := b.report(time.Now())
	assert.Empty(t, r.Spread)
	var out bytes.Buffer
	require.NoError(t, printReport(&out, r))
	assert.Contains(t, out.String(), "bandwidth, MB/s")
	assert.NotContains(t, out.String(), "bandwidth over the rounds")
	assert.NotContains(t, out.String(), "raw Go, MB/s")
}

// fieldsOf returns the fields of the first line after the heading that
// starts with first (after spaces).
func fieldsOf(lines []string, heading, first string) []string {
	in := false
	for _, l := range lines {
		if strings.HasPrefix(l, heading) {
			in = true
			continue
		}
		if in && strings.HasPrefix(strings.TrimSpace(l), first+" ") {
			return strings.Fields(l)
		}
	}
	return nil
}

func TestCoalescedLine(t *testing.T) {
	assert.Equal(t, "coalesced 64 B msg/s (netio-go): failed", coalescedLine(coalescedRow{Status: statusFailed}))
	line := coalescedLine(coalescedRow{Status: statusOK, MsgsPerS: 12e6, Ratio: map[string]float64{implC: 60, implBufio: 1.2}})
	assert.Equal(t, "coalesced 64 B msg/s (netio-go): 12.000 Mmsg/s; netio ratio to C 64 B 60.00; "+
		"netio ratio to C+yield 64 B -; netio ratio to TCP 64 B -; netio ratio to TCP+bufio 64 B 1.20", line)
}

func TestLoadAverage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loadavg")
	require.NoError(t, os.WriteFile(path, []byte("14.42 11.45 6.52 3/412 2912\n"), 0o600))
	assert.Equal(t, "14.42 11.45 6.52", loadAverage(path))
	require.NoError(t, os.WriteFile(path, []byte("1.0\n"), 0o600))
	assert.Empty(t, loadAverage(path))
	assert.Empty(t, loadAverage(filepath.Join(t.TempDir(), "missing")))
}

func TestCPUModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpuinfo")
	require.NoError(t, os.WriteFile(path, []byte("processor\t: 0\nmodel name\t: Test CPU @ 1GHz\nflags\t: x\n"), 0o600))
	assert.Equal(t, "Test CPU @ 1GHz", cpuModel(path))
	assert.Empty(t, cpuModel(filepath.Join(t.TempDir(), "missing")))
}
