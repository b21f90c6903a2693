// Package perfplot draws the performance tools' picture: bandwidth and
// one-way latency against message size, one line per program, side by side.
// netio-perf --plot and make bench (hack/benchcompare) both draw through it,
// so that the two pictures read the same way. The drawing is gonum's
// (gonum.org/v1/plot); this package only shapes the figure.
package perfplot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The picture's size: 720 × 300 points, which is PixelWidth × PixelHeight
// pixels in a PNG (at DPI dots per inch) and the width and height an SVG
// declares.
const (
	WidthPt     = 720
	HeightPt    = 300
	DPI         = 96
	PixelWidth  = WidthPt * DPI / 72
	PixelHeight = HeightPt * DPI / 72
)

// Errors. Write wraps them; match with errors.Is.
var (
	// ErrFormat: the file name ends in neither .svg nor .png.
	ErrFormat = errors.New("perfplot: the plot file must end in .svg or .png")
	// ErrNoData: no series has a point with a positive size and value.
	ErrNoData = errors.New("perfplot: nothing to plot")
)

// Point is one message size and the figure measured at it. Points with a
// size or value that is not positive (a failed or missing measurement) are
// left out of the picture: the axes are logarithmic.
type Point struct {
	Size  int
	Value float64
}

// Series is one line: a program (or a percentile) over the sizes.
type Series struct {
	Name   string
	Points []Point
}

// Figure is the picture: a title over two panels, bandwidth on the left
// and latency on the right. A panel without a single plottable point is
// left out and the other takes the whole width.
type Figure struct {
	Title     string
	Bandwidth []Series // MB/s (10^6 bytes per second)
	Latency   []Series // µs
	// LatencyTitle names what the latency panel shows; empty: "one-way
	// latency (RTT/2)".
	LatencyTitle string
}

// CheckPath returns the format a plot file name asks for, "svg" or "png",
// or ErrFormat.
func CheckPath(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	}
	return "", fmt.Errorf("%w: %q", ErrFormat, path)
}

// Write draws the figure into path, as SVG or PNG by its extension. On an
// error no file is left behind (a file that was there before is replaced
// only by a complete picture).
func Write(path string, fig Figure) error {
	format, err := CheckPath(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".perfplot-*")
	if err != nil {
		return fmt.Errorf("perfplot: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if err := Render(tmp, format, fig); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("perfplot: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("perfplot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("perfplot: %w", err)
	}
	return nil
}

// Render draws the figure to w in format "svg" or "png". gonum reports
// some bad input by panicking (a log axis over a value that is not
// positive); Render filters what it knows of, and turns any other such
// panic into an error: a picture must not take a finished benchmark run
// down with it.
func Render(w io.Writer, format string, fig Figure) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("perfplot: drawing failed: %v", r)
		}
	}()
	panels := fig.panels()
	if len(panels) == 0 {
		return ErrNoData
	}
	var c vg.CanvasWriterTo
	switch format {
	case "svg":
		c = vgsvg.New(WidthPt, HeightPt)
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(WidthPt, HeightPt), vgimg.UseDPI(DPI))}
	default:
		return fmt.Errorf("%w: format %q", ErrFormat, format)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: 6 * vg.Millimeter,
		PadTop: drawTitle(dc, fig.Title) + vg.Millimeter, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("perfplot: %w", err)
	}
	return nil
}

// drawTitle paints the picture's white background, writes the title across
// its top and returns the height the title takes.
func drawTitle(dc draw.Canvas, title string) vg.Length {
	dc.SetColor(plot.New().BackgroundColor)
	dc.Fill(dc.Rectangle.Path())
	if title == "" {
		return 0
	}
	sty := plot.New().Title.TextStyle
	sty.Font.Size, sty.Font.Variant = 13, "Sans"
	top := dc.Max.Y - vg.Millimeter
	dc.FillText(sty, vg.Point{X: dc.Center().X, Y: top}, title)
	return sty.Rectangle(title).Size().Y + 2*vg.Millimeter
}

// panels returns a plot for each panel that has data.
func (f Figure) panels() []*plot.Plot {
	latency := f.LatencyTitle
	if latency == "" {
		latency = "one-way latency (RTT/2)"
	}
	var out []*plot.Plot
	if p := panel("bandwidth, MB/s (10^6 bytes/s)", f.Bandwidth); p != nil {
		out = append(out, p)
	}
	if p := panel(latency+", µs", f.Latency); p != nil {
		out = append(out, p)
	}
	return out
}

// panel returns one log-log plot of the series against message size, under
// a title that names the figure, or nil when no series has a plottable
// point. The figure is named in the title, not along the Y axis: gonum
// centers a Y label on the arithmetic middle of the axis range, which on a
// log scale sits near the top, and pads the plot for it.
func panel(title string, series []Series) *plot.Plot {
	var sizes []int
	var lo, hi = math.Inf(1), math.Inf(-1)
	p := plot.New()
	for i, s := range series {
		xys := plottable(s.Points)
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue // plottable keeps only finite points: cannot happen
		}
		line.Color, line.Width = palette(i), vg.Points(1.5)
		points.Color, points.Shape = palette(i), plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
		for _, xy := range xys {
			sizes = append(sizes, int(xy.X))
			lo, hi = min(lo, xy.Y), max(hi, xy.Y)
		}
	}
	if len(sizes) == 0 {
		return nil
	}
	p.Add(plotter.NewGrid())
	p.Title.Text, p.X.Label.Text = title, "message size"
	p.Title.TextStyle.Font.Size = 11
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = sizeTicks(sizes)
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// Whole decades, so that the log ticks always label at least two.
	p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if p.Y.Min == p.Y.Max {
		p.Y.Max *= 10
	}
	if p.X.Min == p.X.Max {
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	// Every curve rises to the right: the lower right corner is free.
	p.Legend.XOffs, p.Legend.YOffs = -2*vg.Millimeter, 2*vg.Millimeter
	sans(p)
	return p
}

// sans sets every text of the plot in the sans-serif variant of gonum's
// default typeface, which reads better at small sizes on a screen.
func sans(p *plot.Plot) {
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.Legend.TextStyle.Font,
		&p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font} {
		f.Variant = "Sans"
	}
	p.Legend.TextStyle.Font.Size = 11
}

// plottable returns the points with a positive, finite size and value.
func plottable(points []Point) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range points {
		if pt.Size > 0 && pt.Value > 0 && !math.IsInf(pt.Value, 0) {
			xys = append(xys, plotter.XY{X: float64(pt.Size), Y: pt.Value})
		}
	}
	return xys
}

// palette returns the color of series i: strong colors, which read better
// on thin lines than gonum's default soft ones.
func palette(i int) color.Color {
	return plotutil.DarkColors[i%len(plotutil.DarkColors)]
}

// sizeTicks labels the measured sizes ("64 B", "4 KiB", "1 MiB").
func sizeTicks(sizes []int) plot.ConstantTicks {
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	ticks := make(plot.ConstantTicks, len(sizes))
	for i, n := range sizes {
		ticks[i] = plot.Tick{Value: float64(n), Label: FormatSize(n)}
	}
	return ticks
}

// FormatSize renders a size as the tools' tables show it: "64 B", "4 KiB",
// "1 MiB", or plain bytes when it is not a whole multiple.
func FormatSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
