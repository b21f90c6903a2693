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
}

// loadFigure reads the picture from a JSON file the harness wrote: one line
// per program, bandwidth and median one-way latency against message size.
// It is the one place that reads the file for the picture.
func loadFigure(path string) (perfplot.Figure, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return perfplot.Figure{}, err
	}
	var j plotJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return perfplot.Figure{}, fmt.Errorf("%s: %w", path, err)
	}
	fig := perfplot.Figure{
		Title: fmt.Sprintf("make bench: netio-go vs C libfabric vs Go TCP, provider %s, 127.0.0.1, medians of %d rounds",
			j.Provider, j.Rounds),
		LatencyTitle: "one-way latency (RTT/2), median",
	}
	for _, sec := range j.Summary {
		byImpl := map[string]*perfplot.Series{}
		for _, row := range sec.Rows {
			for impl, v := range row.Median {
				if byImpl[impl] == nil {
					byImpl[impl] = &perfplot.Series{Name: implLabel(impl)}
				}
				byImpl[impl].Points = append(byImpl[impl].Points, perfplot.Point{Size: row.Size, Value: v})
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
	return fig, nil
}

// implLabel returns the tables' label of an implementation, or its name
// when the tables do not know it.
func implLabel(impl string) string {
	if impl == implRawGo {
		return "raw Go (fabric)"
	}
	for _, im := range impls {
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
	rank := func(impl string) int {
		for i, im := range impls {
			if im.id == impl {
				return i
			}
		}
		return len(impls)
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
