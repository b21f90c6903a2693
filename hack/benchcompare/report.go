package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netio-go/netio/internal/perfplot"
	"golang.org/x/sys/unix"
)

// report is the JSON file: the set-up, every raw sample of every round, and
// the medians and ratios the tables show.
type report struct {
	Started     time.Time      `json:"started"`
	WallSeconds float64        `json:"wall_seconds"`
	Machine     machine        `json:"machine"`
	Provider    string         `json:"provider"`
	Rounds      int            `json:"rounds"`
	DurationS   float64        `json:"duration_s"`
	Sizes       []int          `json:"sizes"`
	ScaleSize   int            `json:"scale_size"`
	ScaleConns  []int          `json:"scale_conns"`
	Windows     map[int]window `json:"windows"` // by size: what netio-go and C both used
	Samples     []sample       `json:"samples"`
	Summary     []section      `json:"summary"`
	Coalesced   coalescedRow   `json:"coalesced"`
	Scale       []scaleRow     `json:"scale"`
	RawGo       []rawGoRow     `json:"raw_go"`
	Spread      []spreadRow    `json:"spread"` // bandwidth by round: netio-go and C
	Failures    int            `json:"failures"`
	// OneProcess says whether the one-process part ran (the keys above);
	// TwoProcess is the two-process comparison, when it ran.
	OneProcess bool           `json:"one_process"`
	TwoProcess *twoProcReport `json:"two_process,omitempty"`
}

// machine names what the run ran on.
type machine struct {
	Host      string `json:"host"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Libfabric string `json:"libfabric"`
	// Load averages (1, 5, 15 minutes) when the run started and ended:
	// other work on the machine is what makes the figures noisy.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

// thisMachine collects the machine description, with the load average now
// as LoadEnd; parts it cannot find stay empty.
func thisMachine(loadavg string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), LoadEnd: loadAverage(loadavg)}
	m.Host, _ = os.Hostname()
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.Command("pkg-config", "--modversion", "libfabric").Output(); err == nil {
		m.Libfabric = strings.TrimSpace(string(out))
	}
	m.CPUModel = cpuModel("/proc/cpuinfo")
	return m
}

// loadAverage returns the 1, 5 and 15 minute load averages of a loadavg
// file, or "" when it cannot be read.
func loadAverage(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the first "model name" of a cpuinfo file.
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// writeJSON writes the report, indented, to path.
func writeJSON(path string, r *report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// printReport writes the tables: one per metric, the coalesced row after the
// message rates, then the scaling figures.
func printReport(w io.Writer, r *report) error {
	m := r.Machine
	fmt.Fprintf(w, "\nnetio-go vs fabtests vs C libfabric vs Go net.TCPConn: provider %s, 127.0.0.1, %.1fs per measurement\n", r.Provider, r.DurationS)
	fmt.Fprintf(w, "machine: %s, %d CPUs (%s), %s, %s, libfabric %s\n", m.Host, m.CPUs, m.CPUModel, m.Kernel, m.Go, m.Libfabric)
	fmt.Fprintf(w, "load average (1 5 15 min): %s at the start, %s at the end\n", m.LoadStart, m.LoadEnd)
	fmt.Fprintln(w, "MB = 10^6 bytes, GB = 10^9 bytes; ratio = netio-go / other")
	if err := printTwoProc(w, r.TwoProcess, r.Provider); err != nil {
		return err
	}
	if !r.OneProcess {
		return nil
	}
	fmt.Fprintf(w, "\nONE PROCESS: netio-go and C with sender and receiver in one process, same window and receive depth, medians of %d rounds\n", r.Rounds)
	fmt.Fprintln(w, "C spins on fi_cq_read; C+yield calls sched_yield() after each empty poll (netio-go's pollers yield while they spin)")
	for i, sec := range r.Summary {
		fmt.Fprintf(w, "\n%s\n", sec.Title)
		if err := printSection(w, sec, metrics[i]); err != nil {
			return err
		}
		if sec.Metric == "msgs_per_s" {
			fmt.Fprintln(w, coalescedLine(r.Coalesced))
		}
		if sec.Metric == "mb_per_s" {
			if err := printSpread(w, r.Spread); err != nil {
				return err
			}
			if err := printRawGo(w, r.RawGo); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "\nscaling: netio-go, N connections into one receiver, %s messages (medians)\n", formatSize(r.ScaleSize))
	tw := newTable(w, "conns", "MB/s", "Mmsg/s", "CPU s/GB", "rounds")
	for _, s := range r.Scale {
		if s.Rounds == 0 {
			fmt.Fprintf(tw, "%d\tfailed\t\t\t0\t\n", s.Connections)
			continue
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.4f\t%.3f\t%d\t\n", s.Connections, s.MBPerS, s.MsgsPerS/1e6, s.CPUSecPerGB, s.Rounds)
	}
	return tw.Flush()
}

// newTable returns a writer for one of the report's tables, right-aligned
// columns two spaces apart, with the header row already written. Every
// row ends in a tab, as the header does. Flush it after the rows.
func newTable(w io.Writer, columns ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(columns, "\t")+"\t")
	return tw
}

// printSpread writes, under the bandwidth table, how far netio-go and C
// moved over the rounds and their ratio round by round: what a median
// ratio near a target is worth.
func printSpread(w io.Writer, rows []spreadRow) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nbandwidth over the rounds, MB/s: lowest-highest, and netio-go/C in each round (rounds interleaved; - where one failed)")
	tw := newTable(w, "size", "netio-go", "C", "netio/C by round")
	for _, r := range rows {
		ratios := make([]string, len(r.Ratios))
		for i, x := range r.Ratios {
			ratios[i] = ratioCell(x)
		}
		fmt.Fprintf(tw, "%s\t%.0f-%.0f\t%.0f-%.0f\t%s\t\n", formatSize(r.Size), r.Netio.Min, r.Netio.Max,
			r.C.Min, r.C.Max, strings.Join(ratios, " "))
	}
	return tw.Flush()
}

// printRawGo writes the raw Go rows under the bandwidth table, if any.
func printRawGo(w io.Writer, rows []rawGoRow) error {
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nraw Go, MB/s: a Go program in C's exact shape on netio-go's fabric package alone, no netio code (fabric BenchmarkRawStream), medians")
	tw := newTable(w, "size", "raw Go", "CPU s/GB", "raw Go/C", "netio/raw Go", "rounds")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.3f\t%s\t%s\t%d\t\n", formatSize(r.Size), r.MBPerS, r.CPUSecPerGB,
			ratioCell(r.OverC), ratioCell(r.NetioOver), r.Rounds)
	}
	return tw.Flush()
}

// printSection writes one metric's table: the medians per implementation,
// then netio-go's ratio to each other implementation.
func printSection(w io.Writer, sec section, m metric) error {
	head := []string{"size"}
	for _, im := range impls {
		head = append(head, im.label)
	}
	for _, im := range impls[1:] {
		head = append(head, "netio/"+im.label)
	}
	tw := newTable(w, head...)
	for _, row := range sec.Rows {
		cells := []string{formatSize(row.Size)}
		for _, im := range impls {
			cells = append(cells, valueCell(row, im.id, m))
		}
		for _, im := range impls[1:] {
			cells = append(cells, ratioCell(row.Ratio[im.id]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// valueCell renders a median, or "failed" when every round of it failed.
func valueCell(row sectionRow, impl string, m metric) string {
	v, ok := row.Median[impl]
	if !ok {
		return "failed"
	}
	return fmt.Sprintf(m.format, v*m.scale)
}

// ratioCell renders a ratio, or "-" when one side is missing.
func ratioCell(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

// coalescedLine renders the coalesced 64 B row.
func coalescedLine(c coalescedRow) string {
	const label = "coalesced 64 B msg/s (netio-go):"
	switch c.Status {
	case statusNotBuilt:
		return label + " n/a (not built)"
	case statusFailed:
		return label + " failed"
	}
	parts := []string{fmt.Sprintf("%s %.3f Mmsg/s", label, c.MsgsPerS/1e6)}
	for _, im := range impls[1:] {
		parts = append(parts, fmt.Sprintf("%s ratio to %s 64 B %s", "netio", im.label, ratioCell(c.Ratio[im.id])))
	}
	return strings.Join(parts, "; ")
}

// formatSize renders a size as the tables show it: "64 B", "4 KiB", "1 MiB"
// (the plot's tick labels, one implementation).
func formatSize(n int) string { return perfplot.FormatSize(n) }
