package main

import (
	"fmt"
	"io"
	"strings"
)

// printTwoProc writes the two-process tables: bandwidth (median and
// min-max), message rate and CPU, latency, and loopback TCP's two modes
// where a size ran in both.
func printTwoProc(w io.Writer, r *twoProcReport, provider string) error {
	if r == nil || len(r.Rows) == 0 {
		return nil
	}
	fab := "fabtests not found (set " + FabtestsEnv + " or put fi_msg_bw and fi_msg_pingpong on PATH)"
	if r.Fabtests != "" {
		fab = "fabtests from " + r.Fabtests
	}
	fmt.Fprintf(w, "\nTWO PROCESSES: every contender as a server process and a client process, provider %s, 127.0.0.1, window %d, medians of %d interleaved rounds; %s\n",
		provider, r.Window, r.Rounds, fab)
	fmt.Fprintf(w, "bandwidth is the receiver's (first message to last), latency the client's; per-round ratios are against %s\n", r.Reference)

	fmt.Fprintln(w, "\nbandwidth, MB/s: median (lowest-highest) (higher is better)")
	head := []string{"size"}
	for _, im := range impls2p {
		head = append(head, im.label)
	}
	for _, im := range impls2p[1:] {
		head = append(head, "netio/"+im.label)
	}
	tw := newTable(w, append(head, "netio/"+labelOf(r.Reference)+" by round")...)
	for _, row := range r.Rows {
		cells := []string{formatSize(row.Size)}
		for _, im := range impls2p {
			cells = append(cells, bandwidthCell(row.Impl[im.id]))
		}
		for _, im := range impls2p[1:] {
			cells = append(cells, ratioCell(row.BWRatio[im.id]))
		}
		byRound := make([]string, len(row.ByRound))
		for i, x := range row.ByRound {
			byRound[i] = ratioCell(x)
		}
		fmt.Fprintln(tw, strings.Join(append(cells, strings.Join(byRound, " ")), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printTwoProcRates(w, r.Rows); err != nil {
		return err
	}
	if err := printTwoProcLatency(w, r.Rows, r.BusyPoll); err != nil {
		return err
	}
	return printTCPModes(w, r.Rows)
}

// printTwoProcRates writes the message rates and the CPU per GB.
func printTwoProcRates(w io.Writer, rows []twoProcRow) error {
	fmt.Fprintln(w, "\nmessage rate, Mmsg/s, and CPU s/GB (user+sys of both processes beyond a set-up pair's; lower is better), medians")
	head := []string{"size"}
	for _, im := range impls2p {
		head = append(head, im.label+" Mmsg/s")
	}
	for _, im := range impls2p {
		head = append(head, im.label+" s/GB")
	}
	tw := newTable(w, head...)
	for _, row := range rows {
		cells := []string{formatSize(row.Size)}
		for _, im := range impls2p {
			cells = append(cells, figureCell(row.Impl[im.id].MsgsPerS/1e6, "%.4f"))
		}
		for _, im := range impls2p {
			cells = append(cells, figureCell(row.Impl[im.id].CPUSecPerGB, "%.3f"))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printInjectRates(w, rows)
	return nil
}

// printInjectRates writes the inject contender's rates (netio-perf client
// --inject), at the sizes it ran, against C's.
func printInjectRates(w io.Writer, rows []twoProcRow) {
	for _, row := range rows {
		inj, c := row.Impl[impl2pNetioInject], row.Impl[impl2pC]
		if inj.MsgsPerS <= 0 {
			continue
		}
		fmt.Fprintf(w, "netio-go client --inject (SendConfig.Inject) %s: %s Mmsg/s, %s of C's, CPU %s s/GB\n",
			formatSize(row.Size), figureCell(inj.MsgsPerS/1e6, "%.4f"), figureCell(ratio(inj.MsgsPerS, c.MsgsPerS), "%.2fx"),
			figureCell(inj.CPUSecPerGB, "%.3f"))
	}
}

// printTwoProcLatency writes the one-way latencies: the mean (fabtests'
// figure) and the p50 where a contender has it.
func printTwoProcLatency(w io.Writer, rows []twoProcRow, busyPoll string) error {
	fmt.Fprintf(w, "\nping-pong one-way latency (RTT/2), µs: median of the per-round mean (p50) (lower is better); netio busy = --poll %s\n", busyPoll)
	head := []string{"size", "netio-go", "netio busy"}
	for _, im := range impls2p[1:] {
		head = append(head, im.label)
	}
	for _, im := range impls2p[1:] {
		head = append(head, "netio/"+im.label)
	}
	tw := newTable(w, append(head, "busy/fabtests")...)
	for _, row := range rows {
		cells := []string{formatSize(row.Size), latencyCell(row.Impl[impl2pNetio]), latencyCell(row.Impl[impl2pNetioBusy])}
		for _, im := range impls2p[1:] {
			cells = append(cells, latencyCell(row.Impl[im.id]))
		}
		for _, im := range impls2p[1:] {
			cells = append(cells, ratioCell(row.LatRatio[im.id]))
		}
		cells = append(cells, ratioCell(row.LatRatio[impl2pNetioBusy+"/"+implFabtests]))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// printTCPModes writes, for the sizes whose rounds fell in loopback TCP's
// two modes, each contender's rounds and median in each.
func printTCPModes(w io.Writer, rows []twoProcRow) error {
	var split []twoProcRow
	for _, row := range rows {
		if row.Modes != nil {
			split = append(split, row)
		}
	}
	if len(split) == 0 {
		fmt.Fprintln(w, "\nloopback TCP's two modes: no size's reference rounds fell in two groups this run")
		return nil
	}
	fmt.Fprintf(w, "\nloopback TCP's two modes: where the reference's rounds fell in two groups (%.1fx apart or more), rounds at or above the split are \"fast\"; rounds and median MB/s in each\n", modeGap)
	head := []string{"size", "split MB/s"}
	for _, im := range impls2p {
		head = append(head, im.label+" slow", im.label+" fast")
	}
	tw := newTable(w, head...)
	for _, row := range split {
		cells := []string{formatSize(row.Size), fmt.Sprintf("%.0f", row.Modes.Split)}
		for _, im := range impls2p {
			cells = append(cells, modeCell(row.Modes.Slow[im.id]), modeCell(row.Modes.Fast[im.id]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// labelOf returns a two-process contender's column label.
func labelOf(impl string) string {
	for _, im := range impls2p {
		if im.id == impl {
			return im.label
		}
	}
	return impl
}

func bandwidthCell(f figures) string {
	if f.Rounds == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f-%.0f)", f.MBPerS, f.MBPerSMin, f.MBPerSMax)
}

func latencyCell(f figures) string {
	switch {
	case f.LatRounds == 0:
		return "-"
	case f.LatP50us > 0:
		return fmt.Sprintf("%.2f (%.2f)", f.LatMeanus, f.LatP50us)
	}
	return fmt.Sprintf("%.2f", f.LatMeanus)
}

func modeCell(m modeFigure) string {
	if m.Rounds == 0 {
		return "0"
	}
	return fmt.Sprintf("%d: %.0f", m.Rounds, m.MBPerS)
}

// figureCell renders a positive figure, or "-".
func figureCell(v float64, format string) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
