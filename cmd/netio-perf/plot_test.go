package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/netio-go/netio/internal/perfplot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotutil"
)

// The sweep draws a real PNG of the plotter's size, with netio-go's line
// in both panels (bandwidth left, latency right).
func TestSweepPlotPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.png")
	r, progress := runSweepJSON(t, "--quick", "--sizes", "64,4K", "--plot", path)
	require.Len(t, r.Rows, 2, "--plot keeps the JSON report")
	assert.Contains(t, progress, "plot written to "+path)

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, perfplot.PixelWidth, perfplot.PixelHeight), img.Bounds())
	line := plotutil.DarkColors[0] // the first series: bandwidth, and p50 latency
	lr, lg, lb, _ := line.RGBA()
	var left, right int
	for y := range perfplot.PixelHeight {
		for x := range perfplot.PixelWidth {
			if r, g, b, _ := img.At(x, y).RGBA(); r == lr && g == lg && b == lb {
				if x < perfplot.PixelWidth/2 {
					left++
				} else {
					right++
				}
			}
		}
	}
	assert.Greater(t, left, 100, "bandwidth line drawn")
	assert.Greater(t, right, 100, "latency line drawn")
}

// The SVG names the measured sizes, the series and the run.
func TestSweepPlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.svg")
	table, _ := runSweepTable(t, "--quick", "--sizes", "64,4K", "--plot", path)
	assert.Contains(t, table, "netio-perf loopback sweep", "--plot keeps the table")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var root struct {
		XMLName xml.Name
		Width   string `xml:"width,attr"`
	}
	require.NoError(t, xml.Unmarshal(data, &root), "well-formed XML")
	assert.Equal(t, "svg", root.XMLName.Local)
	assert.Equal(t, fmt.Sprintf("%dpt", perfplot.WidthPt), root.Width)
	for _, want := range []string{"netio-perf loopback sweep, provider tcp, mode send", "64 B", "4 KiB",
		"message size", "netio-go", "netio-go p50", "netio-go p99"} {
		assert.Contains(t, string(data), ">"+want+"</text>")
	}
}

// Each row's figures go to the right series.
func TestSweepFigure(t *testing.T) {
	rows := []sweepRow{{Size: 64, MBPerS: 10, LatP50us: 5, LatP99us: 9}, {Size: 4096, MBPerS: 700, LatP50us: 7, LatP99us: 20}}
	fig := sweepFigure(sweepOptions{commonFlags: commonFlags{provider: "sockets"}, mode: modeSend}, rows)
	assert.Equal(t, "netio-perf loopback sweep, provider sockets, mode send", fig.Title)
	require.Len(t, fig.Bandwidth, 1)
	require.Len(t, fig.Latency, 2)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 10}, {Size: 4096, Value: 700}}, fig.Bandwidth[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 5}, {Size: 4096, Value: 7}}, fig.Latency[0].Points)
	assert.Equal(t, []perfplot.Point{{Size: 64, Value: 9}, {Size: 4096, Value: 20}}, fig.Latency[1].Points)
	assert.Equal(t, "netio-go p99", fig.Latency[1].Name)
	assert.Empty(t, fig.LatencyTitle)

	fig = sweepFigure(sweepOptions{mode: modeRMARead, zeroCopy: true}, rows)
	assert.Equal(t, "netio-go zero-copy", fig.Bandwidth[0].Name)
	assert.Contains(t, fig.LatencyTitle, "rma-read")
}

// A --plot the plotter cannot write, or a mode without latency by size, is
// a usage error before anything runs, and no file appears.
func TestSweepPlotUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--plot", filepath.Join(dir, "sweep.gif")},
		{"--plot", filepath.Join(dir, "sweep")},
		{"--mode", "scale", "--plot", filepath.Join(dir, "scale.png")},
		{"--mode", "coalesce", "--plot", filepath.Join(dir, "coalesce.svg")},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(t.Context(), args, &out, &errOut), "%q", args)
		assert.Contains(t, errOut.String(), "--plot", "%q", args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
