package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTool writes a shell script that prints stdout and exits with code.
func fakeTool(t *testing.T, stdout string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool")
	script := "#!/bin/sh\necho progress >&2\ncat <<'END'\n" + stdout + "\nEND\nexit " + strconv.Itoa(code) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

func fakeTools(perf string) tools {
	return tools{netioPerf: perf, cbaseline: perf, provider: "tcp", duration: time.Second, timeout: 10 * time.Second}
}

// A netio-perf without --mode coalesce exits with the usage status: the
// row is "not built", which is no error.
func TestCoalescedNotBuilt(t *testing.T) {
	s, err := fakeTools(fakeTool(t, "usage: ...", exitUsage)).coalesced(t.Context())
	require.NoError(t, err)
	assert.True(t, s.NotBuilt)
	assert.False(t, s.ok())
}

func TestCoalescedReadsTheRow(t *testing.T) {
	perf := fakeTool(t, `{"role":"sweep","mode":"coalesce","rows":[{"size":64,"messages":10000000,"seconds":1,"mb_per_s":640,"msgs_per_s":1e7}]}`, 0)
	s, err := fakeTools(perf).coalesced(t.Context())
	require.NoError(t, err)
	assert.Equal(t, sample{Impl: implNetio, Mode: modeCoalesced, Size: 64, Messages: 10000000, Seconds: 1, MBPerS: 640, MsgsPerS: 1e7}, s)
}

// Any other failure of the coalesced run is an error, with the tool's last
// stderr line.
func TestCoalescedFailure(t *testing.T) {
	_, err := fakeTools(fakeTool(t, "", 1)).coalesced(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "progress")
}

func TestNetioRejectsWrongRows(t *testing.T) {
	_, err := fakeTools(fakeTool(t, `{"rows":[{"size":128}]}`, 0)).netio(t.Context(), 64)
	assert.ErrorContains(t, err, "want one row of 64 B")
	_, err = fakeTools(fakeTool(t, `not json`, 0)).netio(t.Context(), 64)
	assert.ErrorContains(t, err, "not json")
}

func TestNetioSplitsTheRow(t *testing.T) {
	perf := fakeTool(t, `{"rows":[{"size":64,"messages":5,"seconds":0.5,"mb_per_s":1,"msgs_per_s":10,"cpu_s_per_gb":2,"round_trips":7,"latency_p50_us":3,"latency_p99_us":4}]}`, 0)
	got, err := fakeTools(perf).netio(t.Context(), 64)
	require.NoError(t, err)
	assert.Equal(t, []sample{
		{Impl: implNetio, Mode: modeBandwidth, Size: 64, Messages: 5, Seconds: 0.5, MBPerS: 1, MsgsPerS: 10, CPUSecPerGB: 2},
		{Impl: implNetio, Mode: modePingPong, Size: 64, RoundTrips: 7, LatP50us: 3, LatP99us: 4},
	}, got)
}

// goBenchOutput is what a fabric test binary prints for the 1 MiB raw
// stream, around the result line.
const goBenchOutput = `goos: linux
goarch: amd64
pkg: github.com/netio-go/netio/fabric
BenchmarkRawStream/1024KiB-2   	    6000	    160000 ns/op	6553.60 MB/s	         0.3100 cpu-s/GB	       0 B/op	       0 allocs/op
PASS`

func TestRawGoReadsTheBenchmarkLine(t *testing.T) {
	tl := fakeTools("")
	tl.fabricTest = fakeTool(t, goBenchOutput, 0)
	got, err := tl.rawGo(t.Context(), 1<<20)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, sample{Impl: implRawGo, Mode: modeBandwidth, Size: 1 << 20, Messages: 6000, Seconds: 0.96,
		MBPerS: 6553.6, MsgsPerS: 6250, CPUSecPerGB: 0.31}, got[0])
}

// A missing or broken result line, a failing binary (go test reports on
// standard output) and a size without a benchmark are errors that say so.
func TestRawGoErrors(t *testing.T) {
	tl := fakeTools("")
	tl.fabricTest = fakeTool(t, goBenchOutput, 0)
	_, err := tl.rawGo(t.Context(), 64<<10)
	assert.ErrorContains(t, err, "no result line for BenchmarkRawStream/64KiB")
	_, err = tl.rawGo(t.Context(), 4096)
	assert.ErrorContains(t, err, "no raw stream benchmark of 4096 B")

	tl.fabricTest = fakeTool(t, "BenchmarkRawStream/1024KiB-2 many 1 ns/op", 0)
	_, err = tl.rawGo(t.Context(), 1<<20)
	assert.ErrorContains(t, err, "iterations")
	tl.fabricTest = fakeTool(t, "BenchmarkRawStream/1024KiB-2 10 100 ns/op", 0)
	_, err = tl.rawGo(t.Context(), 1<<20)
	assert.ErrorContains(t, err, "want iterations, ns/op and MB/s")

	tl.fabricTest = filepath.Join(t.TempDir(), "failing.test")
	script := "#!/bin/sh\ncat <<'END'\n--- FAIL: BenchmarkRawStream/1024KiB\n    stream_bench_test.go:70: connect refused\nFAIL\nEND\nexit 1\n"
	require.NoError(t, os.WriteFile(tl.fabricTest, []byte(script), 0o755))
	_, err = tl.rawGo(t.Context(), 1<<20)
	assert.ErrorContains(t, err, "connect refused")
}

// Raw Go runs at 64 KiB and 1 MiB on tcp only, and not at all
// without a test binary.
func TestHasRawGo(t *testing.T) {
	tl := fakeTools("")
	tl.fabricTest = "bin/fabric.test"
	assert.True(t, tl.hasRawGo(64<<10))
	assert.True(t, tl.hasRawGo(1<<20))
	assert.False(t, tl.hasRawGo(4096))
	tl.provider = "sockets"
	assert.False(t, tl.hasRawGo(1<<20))
	tl.provider, tl.fabricTest = "tcp", ""
	assert.False(t, tl.hasRawGo(1<<20))
}

// TestRawGoRuns builds the fabric package's test binary and runs the
// real 64 KiB raw stream briefly: its output must parse, with the CPU
// figure.
func TestRawGoRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary")
	}
	bin := filepath.Join(t.TempDir(), "fabric.test")
	out, err := exec.Command("go", "test", "-c", "-o", bin, "../../fabric").CombinedOutput()
	require.NoError(t, err, "%s", out)
	tl := tools{fabricTest: bin, provider: "tcp", duration: 100 * time.Millisecond, timeout: 30 * time.Second}
	got, err := tl.rawGo(t.Context(), 64<<10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	s := got[0]
	assert.Positive(t, s.Messages)
	assert.InDelta(t, float64(s.Messages)*(64<<10)/1e6/s.Seconds, s.MBPerS, 1e-2*s.MBPerS)
	assert.Positive(t, s.CPUSecPerGB)
}

// TestCBaseline builds hack/cbaseline and runs both of its modes briefly on
// the tcp provider: every message sent must arrive, and the figures must be
// consistent.
func TestCBaseline(t *testing.T) {
	bin := buildCBaseline(t)

	tl := tools{cbaseline: bin, provider: "tcp", duration: 100 * time.Millisecond, timeout: 30 * time.Second}
	got, err := tl.c(t.Context(), 4096, false)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, implC, got[0].Impl)
	yielding, err := tl.c(t.Context(), 4096, true)
	require.NoError(t, err)
	require.Len(t, yielding, 2)
	assert.Equal(t, implCYield, yielding[1].Impl)
	assert.Positive(t, yielding[1].RoundTrips)
	b, p := got[0], got[1]
	assert.Equal(t, modeBandwidth, b.Mode)
	assert.Positive(t, b.Messages)
	assert.InDelta(t, float64(b.Messages)*4096/1e6/b.Seconds, b.MBPerS, 1e-3*b.MBPerS)
	assert.Positive(t, b.CPUSecPerGB)
	assert.Equal(t, modePingPong, p.Mode)
	assert.Positive(t, p.RoundTrips)
	assert.GreaterOrEqual(t, p.LatP99us, p.LatP50us)
	assert.Positive(t, p.LatP50us)

	// --noise-us adds a waking thread; the measurement stays whole.
	var noisy perfRow
	require.NoError(t, tl.runJSON(t.Context(), &noisy, bin, "bw", "--provider", "tcp", "--size", "4096",
		"--seconds", "0.1", "--noise-us", "20"))
	assert.Positive(t, noisy.Messages)
	assert.InDelta(t, float64(noisy.Messages)*4096/1e6/noisy.Seconds, noisy.MBPerS, 1e-3*noisy.MBPerS)

	// Bad input: a clear error and exit status 1, nothing measured.
	for flag, args := range map[string][]string{
		"--size":     {"bw", "--provider", "tcp", "--size", "0"},
		"--noise-us": {"bw", "--provider", "tcp", "--size", "64", "--noise-us", "0"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		assert.Error(t, err, flag)
		assert.Contains(t, string(out), flag)
	}
}

// buildCBaseline builds hack/cbaseline into a temporary directory, or skips
// the test without a C compiler or libfabric.
func buildCBaseline(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	flags, err := exec.Command("pkg-config", "--cflags", "--libs", "libfabric").Output()
	if err != nil {
		t.Skip("no libfabric pkg-config")
	}
	bin := filepath.Join(t.TempDir(), "cbaseline")
	args := append([]string{"-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", bin, "../cbaseline/cbaseline.c"}, strings.Fields(string(flags))...)
	out, err := exec.Command(cc, args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}
