package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/netio-go/netio/internal/perfplot"
)

// Metrics of the JSON's summary sections that the picture draws.
const (
	plotBandwidth = "mb_per_s"
	plotLatency   = "latency_p50_us"
)

// plotJSON is the part of the JSON file the picture reads. Decoding ignores
// every other key, so that the harness may add keys (and programs: any
// implementation in a section's medians gets a line) without breaking it.
type plotJSON struct {
	Provider string `json:"provider"`
	Rounds   int    `json:"rounds"`
	Summary  []struct {
		Metric string `json:"metric"`
		Rows   []struct {
			Size   int                `json:"size"`
			Median map[string]float64 `json:"median"`
		} `json:"rows"`
	} `json:"summary"`
	RawGo []struct {
		Size   int     `json:"size"`
		MBPerS float64 `json:"mb_per_s"`
	} `json:"raw_go"`
	TwoProcess *struct {
		Rounds int `json:"rounds"`
		Rows   []struct {
			Size int `json:"size"`
			Impl map[string]struct {
				MBPerS    float64 `json:"mb_per_s"`
				LatMeanus float64 `json:"latency_mean_us"`
			} `json:"impl"`
		} `json:"rows"`
	} `json:"two_process"`
}

// loadFigure reads the picture from a JSON file the harness wrote: one line
// per program, bandwidth and one-way latency against message size. When
// the file has the two-process comparison (every side its own process, the
// shape users meet), the picture is that; otherwise the one-process
// medians. It is the one place that reads the file for the picture.
func loadFigure(path string) (perfplot.Figure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return perfplot.Figure{}, err
	}
	var j plotJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return perfplot.Figure{}, fmt.Errorf("%s: %w", path, err)
	}
	if j.TwoProcess != nil && len(j.TwoProcess.Rows) > 0 {
		return twoProcessFigure(j), nil
	}
	return oneProcessFigure(j), nil
}

// twoProcessFigure is the two-process comparison: median MB/s and mean
// one-way latency (fabtests reports only the mean) by contender.
func twoProcessFigure(j plotJSON) perfplot.Figure {
	bw, lat := map[string]*perfplot.Series{}, map[string]*perfplot.Series{}
	for _, row := range j.TwoProcess.Rows {
		for impl, f := range row.Impl {
			addPoint(bw, impl, row.Size, f.MBPerS)
			addPoint(lat, impl, row.Size, f.LatMeanus)
		}
	}
	return perfplot.Figure{
		Title: fmt.Sprintf("make bench, two processes: netio-go vs fabtests vs C libfabric vs Go TCP, provider %s, 127.0.0.1, medians of %d rounds",
			j.Provider, j.TwoProcess.Rounds),
		Bandwidth:    inTableOrder(bw),
		Latency:      inTableOrder(lat),
		LatencyTitle: "one-way latency (RTT/2), mean",
	}
}

// addPoint adds a point to impl's line, making the line on its first point.
func addPoint(lines map[string]*perfplot.Series, impl string, size int, v float64) {
	if lines[impl] == nil {
		lines[impl] = &perfplot.Series{Name: implLabel(impl)}
	}
	lines[impl].Points = append(lines[impl].Points, perfplot.Point{Size: size, Value: v})
}

// oneProcessFigure is the one-process comparison: the summary's medians,
// and raw Go's bandwidth where it ran.
func oneProcessFigure(j plotJSON) perfplot.Figure {
	fig := perfplot.Figure{
		Title: fmt.Sprintf("make bench: netio-go vs C libfabric vs Go TCP, provider %s, 127.0.0.1, medians of %d rounds",
			j.Provider, j.Rounds),
		LatencyTitle: "one-way latency (RTT/2), median",
	}
	for _, sec := range j.Summary {
		byImpl := map[string]*perfplot.Series{}
		for _, row := range sec.Rows {
			for impl, v := range row.Median {
				addPoint(byImpl, impl, row.Size, v)
			}
		}
		lines := inTableOrder(byImpl)
		switch sec.Metric {
		case plotBandwidth:
			fig.Bandwidth = lines
		case plotLatency:
			fig.Latency = lines
		}
	}
	if len(j.RawGo) > 0 {
		raw := perfplot.Series{Name: implLabel(implRawGo)}
		for _, r := range j.RawGo {
			raw.Points = append(raw.Points, perfplot.Point{Size: r.Size, Value: r.MBPerS})
		}
		fig.Bandwidth = append(fig.Bandwidth, raw)
	}
	return fig
}

// implLabel returns the tables' label of an implementation, or its name
// when the tables do not know it.
func implLabel(impl string) string {
	switch impl {
	case implRawGo:
		return "raw Go (fabric)"
	case impl2pNetioBusy:
		return "netio-go busy"
	case impl2pNetioInject:
		return "netio-go inject"
	}
	for _, im := range slices.Concat(impls, impls2p) {
		if im.id == impl {
			return im.label
		}
	}
	return impl
}

// inTableOrder returns the lines in the tables' column order, with
// implementations the tables do not know after them, by name. Each line's
// points are sorted by size.
func inTableOrder(byImpl map[string]*perfplot.Series) []perfplot.Series {
	known := slices.Concat(impls, impls2p[:1], []struct{ id, label string }{{impl2pNetioBusy, ""}}, impls2p[1:])
	rank := func(impl string) int {
		for i, im := range known {
			if im.id == impl {
				return i
			}
		}
		return len(known)
	}
	ids := make([]string, 0, len(byImpl))
	for id := range byImpl {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b)) })
	out := make([]perfplot.Series, 0, len(ids))
	for _, id := range ids {
		s := *byImpl[id]
		slices.SortFunc(s.Points, func(a, b perfplot.Point) int { return cmp.Compare(a.Size, b.Size) })
		out = append(out, s)
	}
	return out
}

// writePlot draws the picture of the JSON file into plotPath.
func writePlot(jsonPath, plotPath string) error {
	fig, err := loadFigure(jsonPath)
	if err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	if err := perfplot.Write(plotPath, fig); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}
