package main

import (
	"fmt"
	"io"

	"github.com/netio-go/netio/internal/perfplot"
)

// registerPlot adds --plot to the sweep's command line.
func (o *sweepOptions) registerPlot(fs *cmdLine) {
	fs.StringVar(&o.plot, "plot", "", "also draw the sweep's bandwidth and one-way latency against message size into this file (.svg or .png); --mode send, rma-read or rma-write")
}

// checkPlot validates --plot: a file name the plotter can write, and a mode
// that measures bandwidth and latency by size.
func (o *sweepOptions) checkPlot() error {
	if o.plot == "" {
		return nil
	}
	if _, err := perfplot.CheckPath(o.plot); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	switch o.mode {
	case modeSend, modeRMARead, modeRMAWrite:
		return nil
	}
	return fmt.Errorf("--plot needs --mode send, rma-read or rma-write (--mode %s has no latency by size)", o.mode)
}

// writeSweepPlot draws the rows into --plot and says where on stderr.
func writeSweepPlot(o sweepOptions, rows []sweepRow, stderr io.Writer) error {
	if err := perfplot.Write(o.plot, sweepFigure(o, rows)); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	fmt.Fprintf(stderr, "sweep: plot written to %s\n", o.plot)
	return nil
}

// sweepFigure is the sweep's picture: netio-go's bandwidth, and its p50 and
// p99 latency, by size.
func sweepFigure(o sweepOptions, rows []sweepRow) perfplot.Figure {
	name := "netio-go"
	if o.zeroCopy {
		name += " zero-copy"
	}
	bw := perfplot.Series{Name: name}
	p50, p99 := perfplot.Series{Name: name + " p50"}, perfplot.Series{Name: name + " p99"}
	for _, r := range rows {
		bw.Points = append(bw.Points, perfplot.Point{Size: r.Size, Value: r.MBPerS})
		p50.Points = append(p50.Points, perfplot.Point{Size: r.Size, Value: r.LatP50us})
		p99.Points = append(p99.Points, perfplot.Point{Size: r.Size, Value: r.LatP99us})
	}
	fig := perfplot.Figure{
		Title:     fmt.Sprintf("netio-perf loopback sweep, provider %s, mode %s", o.provider, o.mode),
		Bandwidth: []perfplot.Series{bw},
		Latency:   []perfplot.Series{p50, p99},
	}
	if o.mode != modeSend {
		fig.LatencyTitle = "latency of one whole " + o.mode + " operation"
	}
	return fig
}
