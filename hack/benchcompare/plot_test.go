package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/netio-go/netio/internal/perfplot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTestJSON writes testReport's JSON file and returns its path.
func writeTestJSON(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bench-compare.json")
	require.NoError(t, writeJSON(path, testReport(t)))
	return path
}

// names returns the names of the lines.
func names(lines []perfplot.Series) []string {
	var out []string
	for _, s := range lines {
		out = append(out, s.Name)
	}
	return out
}

// The picture has a line per program with the medians the tables show: C's
// failed 64 KiB round is no point, raw Go is a bandwidth line of its own.
func TestLoadFigure(t *testing.T) {
	fig, err := loadFigure(writeTestJSON(t))
	require.NoError(t, err)
	assert.Contains(t, fig.Title, "provider tcp")
	assert.Contains(t, fig.Title, "medians of 1 rounds")
	require.Equal(t, []string{"netio-go", "C", "raw Go (fabric)"}, names(fig.Bandwidth))
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 40}, {Size: 64 << 10, Value: 2000}}, fig.Bandwidth[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 20}}, fig.Bandwidth[1].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64 << 10, Value: 2500}}, fig.Bandwidth[2].Points)
	require.Equal(t, []string{"netio-go", "C"}, names(fig.Latency))
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 6}}, fig.Latency[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 5}}, fig.Latency[1].Points)
}

// Keys the harness adds later, and programs the tables do not know, do
// not break the picture: a new program gets a line after the known ones.
func TestLoadFigureToleratesNewKeys(t *testing.T) {
	path := writeTestJSON(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc))
	doc["three_process"] = map[string]any{"rows": []any{map[string]any{"size": 64, "fabtests": 1.5}}}
	doc["machine"].(map[string]any)["numa"] = 2
	sec := doc["summary"].([]any)[0].(map[string]any)
	sec["note"] = "added"
	row := sec["rows"].([]any)[1].(map[string]any)
	row["median"].(map[string]any)["fabtests"] = 1800.0
	row["median"].(map[string]any)["aaa-new"] = 900.0
	data, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))

	fig, err := loadFigure(path)
	require.NoError(t, err)
	require.Equal(t, []string{"netio-go", "C", "fabtests", "aaa-new", "raw Go (fabric)"}, names(fig.Bandwidth))
	assert.Equal(t, []perfplot.Point{{Size: 64 << 10, Value: 1800}}, fig.Bandwidth[2].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64 << 10, Value: 900}}, fig.Bandwidth[3].Points)
}

// With the two-process comparison in the file, the picture is that one:
// median MB/s and mean one-way latency per contender, in table order.
func TestLoadFigureTwoProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench-compare.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"provider": "tcp", "rounds": 3, "summary": [],
		"two_process": {"rounds": 7, "window": 64, "rows": [
			{"size": 64, "impl": {
				"go-tcp-2p": {"rounds": 7, "mb_per_s": 30, "latency_mean_us": 9},
				"netio-go-2p": {"rounds": 7, "mb_per_s": 20, "latency_p50_us": 6, "latency_mean_us": 7},
				"netio-go-2p-busy": {"latency_mean_us": 5},
				"fabtests": {"rounds": 7, "mb_per_s": 25, "latency_mean_us": 4},
				"c-libfabric-2p": {"rounds": 0}},
			 "netio_bw_ratio": {"fabtests": 0.8}},
			{"size": 4096, "impl": {
				"netio-go-2p": {"rounds": 7, "mb_per_s": 900, "latency_mean_us": 8},
				"fabtests": {"rounds": 7, "mb_per_s": 1000, "latency_mean_us": 7}}}]}}`), 0o644))
	fig, err := loadFigure(path)
	require.NoError(t, err)
	assert.Contains(t, fig.Title, "two processes")
	assert.Contains(t, fig.Title, "medians of 7 rounds")
	assert.Contains(t, fig.LatencyTitle, "mean")
	require.Equal(t, []string{"netio-go", "netio-go busy", "fabtests", "C", "TCP"}, names(fig.Bandwidth))
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 20}, {Size: 4096, Value: 900}}, fig.Bandwidth[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 25}, {Size: 4096, Value: 1000}}, fig.Bandwidth[2].Points)
	require.Equal(t, names(fig.Bandwidth), names(fig.Latency))
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 7}, {Size: 4096, Value: 8}}, fig.Latency[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 5}}, fig.Latency[1].Points)

	out := filepath.Join(t.TempDir(), "bench.svg")
	require.NoError(t, writePlot(path, out), "lines without a positive point are left out, not an error")
}

func TestLoadFigureErrors(t *testing.T) {
	_, err := loadFigure(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"summary": 3}`), 0o644))
	_, err = loadFigure(bad)
	assert.Error(t, err)

	// A file with no medians at all draws nothing and says so.
	empty := filepath.Join(t.TempDir(), "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{"provider": "tcp"}`), 0o644))
	out := filepath.Join(t.TempDir(), "empty.png")
	assert.ErrorIs(t, writePlot(empty, out), perfplot.ErrNoData)
	assert.NoFileExists(t, out)
}

// writePlot draws a real PNG of the plotter's size from the JSON file.
func TestWritePlot(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.png")
	require.NoError(t, writePlot(writeTestJSON(t), out))
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, image.Rect(0, 0, perfplot.PixelWidth, perfplot.PixelHeight), img.Bounds())
}

func TestPlotFlag(t *testing.T) {
	c, err := parseConfig(nil, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "bench-compare.png", c.plotPath)
	c, err = parseConfig([]string{"--plot", "x.svg"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, "x.svg", c.plotPath)
	c, err = parseConfig([]string{"--plot", ""}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Empty(t, c.plotPath)

	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run(t.Context(), []string{"--plot", "x.gif"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "--plot")
}
