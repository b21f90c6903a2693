package perfplot

import (
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotutil"
)

var sizes = []int{64, 1 << 10, 4 << 10, 64 << 10, 1 << 20}

// series returns a line named name with one value per size of sizes.
func series(name string, values ...float64) Series {
	s := Series{Name: name}
	for i, v := range values {
		s.Points = append(s.Points, Point{Size: sizes[i], Value: v})
	}
	return s
}

// sample is a figure like make bench's: three programs, two percentiles.
func sample() Figure {
	return Figure{
		Title: "a sample figure",
		Bandwidth: []Series{series("netio-go", 15, 230, 800, 5000, 7000),
			series("C", 17, 250, 900, 6000, 9000), series("TCP", 10, 150, 600, 4000, 5000)},
		Latency: []Series{series("netio-go p50", 6, 6.5, 8, 30, 400), series("netio-go p99", 12, 14, 20, 60, 800)},
	}
}

func TestCheckPath(t *testing.T) {
	for path, want := range map[string]string{"a.svg": "svg", "dir/b.png": "png", "C.PNG": "png"} {
		got, err := CheckPath(path)
		require.NoError(t, err, path)
		assert.Equal(t, want, got, path)
	}
	for _, path := range []string{"a.jpg", "plot", "", "png", "a.svg.txt"} {
		_, err := CheckPath(path)
		assert.ErrorIs(t, err, ErrFormat, path)
	}
}

// decodePNG reads a PNG file.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img
}

// countColor counts the pixels of img within x0 <= x < x1 that are c.
func countColor(img image.Image, c color.Color, x0, x1 int) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := x0; x < x1; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r == r0 && g == g0 && bl == b0 {
				n++
			}
		}
	}
	return n
}

func TestWritePNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.png")
	require.NoError(t, Write(path, sample()))
	img := decodePNG(t, path)
	assert.Equal(t, image.Rect(0, 0, PixelWidth, PixelHeight), img.Bounds())
	half := PixelWidth / 2
	// The first series' color draws a line in each panel: netio-go on
	// the left, netio-go p50 on the right. A blank or one-panel picture
	// has none of it on one side.
	first, second := plotutil.DarkColors[0], plotutil.DarkColors[1]
	assert.Greater(t, countColor(img, first, 0, half), 300, "bandwidth panel: first line")
	assert.Greater(t, countColor(img, second, 0, half), 300, "bandwidth panel: second line")
	assert.Greater(t, countColor(img, first, half, PixelWidth), 300, "latency panel: first line")
	assert.Greater(t, countColor(img, plotutil.DarkColors[2], 0, half), 300, "bandwidth panel: third line")
	assert.Zero(t, countColor(img, plotutil.DarkColors[2], half, PixelWidth), "latency panel has two lines")
}

func TestWritePNGOnePanel(t *testing.T) {
	fig := sample()
	fig.Bandwidth = []Series{series("failed", 0, 0, 0, 0, 0)}
	path := filepath.Join(t.TempDir(), "latency.png")
	require.NoError(t, Write(path, fig))
	img := decodePNG(t, path)
	assert.Equal(t, image.Rect(0, 0, PixelWidth, PixelHeight), img.Bounds())
	// The latency panel takes the whole width: its first line reaches
	// into the left half.
	assert.Greater(t, countColor(img, plotutil.DarkColors[0], 0, PixelWidth/2), 100)
}

// svgDoc is the part of an SVG file the test reads.
type svgDoc struct {
	XMLName xml.Name
	Width   string `xml:"width,attr"`
	Height  string `xml:"height,attr"`
	Texts   []string
	Strokes map[string]int // stroke colors of the paths
}

// parseSVG parses an SVG file with encoding/xml and collects its texts and
// stroke colors.
func parseSVG(t *testing.T, path string) svgDoc {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	doc := svgDoc{Strokes: map[string]int{}}
	dec := xml.NewDecoder(f)
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch el := tok.(type) {
		case xml.StartElement:
			if doc.XMLName.Local == "" {
				doc.XMLName = el.Name
				for _, a := range el.Attr {
					switch a.Name.Local {
					case "width":
						doc.Width = a.Value
					case "height":
						doc.Height = a.Value
					}
				}
			}
			inText = el.Name.Local == "text"
			for _, a := range el.Attr {
				if _, c, ok := strings.Cut(a.Value, "stroke:"); ok && a.Name.Local == "style" {
					doc.Strokes[strings.ToUpper(strings.SplitN(c, ";", 2)[0])]++
				}
			}
		case xml.CharData:
			if inText {
				doc.Texts = append(doc.Texts, strings.TrimSpace(string(el)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return doc
}

// hexColor renders c as the SVG writer does, e.g. "#EE2E2F".
func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

func TestWriteSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.svg")
	require.NoError(t, Write(path, sample()))
	doc := parseSVG(t, path)
	assert.Equal(t, "svg", doc.XMLName.Local)
	assert.Equal(t, fmt.Sprintf("%dpt", WidthPt), doc.Width)
	assert.Equal(t, fmt.Sprintf("%dpt", HeightPt), doc.Height)
	for _, want := range []string{"a sample figure", "bandwidth, MB/s (10^6 bytes/s)", "one-way latency (RTT/2), µs",
		"message size", "64 B", "1 KiB", "4 KiB", "64 KiB", "1 MiB", "netio-go", "C", "TCP", "netio-go p50", "netio-go p99",
		"10", "10000"} {
		assert.Contains(t, doc.Texts, want)
	}
	for i := range 3 {
		assert.Positive(t, doc.Strokes[hexColor(plotutil.DarkColors[i])], "series %d draws a line", i)
	}
}

func TestLatencyTitle(t *testing.T) {
	fig := sample()
	fig.LatencyTitle = "one rma-read operation"
	path := filepath.Join(t.TempDir(), "rma.svg")
	require.NoError(t, Write(path, fig))
	assert.Contains(t, parseSVG(t, path).Texts, "one rma-read operation, µs")
}

func TestNothingToPlot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "empty.png")
	for name, fig := range map[string]Figure{
		"no series":    {},
		"no points":    {Bandwidth: []Series{{Name: "a"}}, Latency: []Series{{Name: "b"}}},
		"not positive": {Bandwidth: []Series{series("a", 0, -1, math.NaN(), math.Inf(1), 0)}},
		"no size":      {Latency: []Series{{Name: "a", Points: []Point{{Size: 0, Value: 3}, {Size: -64, Value: 4}}}}},
	} {
		assert.ErrorIs(t, Write(path, fig), ErrNoData, name)
		assert.NoFileExists(t, path, name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no temporary file is left")
}

func TestFailedWriteKeepsTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.svg")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	assert.ErrorIs(t, Write(path, Figure{}), ErrNoData)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(data))

	assert.ErrorIs(t, Write(filepath.Join(t.TempDir(), "a.gif"), sample()), ErrFormat)
	assert.Error(t, Write(filepath.Join(t.TempDir(), "missing", "a.png"), sample()))
	assert.ErrorIs(t, Render(io.Discard, "gif", sample()), ErrFormat)
}

func TestOnePointPerSeries(t *testing.T) {
	fig := Figure{Bandwidth: []Series{{Name: "one", Points: []Point{{Size: 4096, Value: 1000}}}},
		Latency: []Series{{Name: "one", Points: []Point{{Size: 4096, Value: 10}}}}}
	path := filepath.Join(t.TempDir(), "one.svg")
	require.NoError(t, Write(path, fig))
	assert.Contains(t, parseSVG(t, path).Texts, "4 KiB")
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int]string{64: "64 B", 1024: "1 KiB", 1536: "1536 B", 4096: "4 KiB", 1 << 20: "1 MiB", 3 << 20: "3 MiB"} {
		assert.Equal(t, want, FormatSize(n))
	}
}
