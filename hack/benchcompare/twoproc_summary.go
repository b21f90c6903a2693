package main

import (
	"math"
	"slices"
)

// twoProcReport is the two-process comparison in the JSON file (key
// "two_process"); its samples are in "samples" with the impl names of
// impls2p and impl2pNetioBusy.
type twoProcReport struct {
	Rounds    int          `json:"rounds"`
	Window    int          `json:"window"`
	Fabtests  string       `json:"fabtests,omitempty"` // the directory fi_msg_bw was found in; empty: not found
	Reference string       `json:"reference"`          // what the by-round ratios and the TCP modes are read against
	BusyPoll  string       `json:"busy_poll"`          // netio-perf --poll of the netio-go-2p-busy ping-pong
	Rows      []twoProcRow `json:"rows"`
}

// figures are one contender's medians at one size (zero where it has no
// successful round).
type figures struct {
	Rounds      int     `json:"rounds"`
	MBPerS      float64 `json:"mb_per_s,omitempty"`
	MBPerSMin   float64 `json:"mb_per_s_min,omitempty"`
	MBPerSMax   float64 `json:"mb_per_s_max,omitempty"`
	MsgsPerS    float64 `json:"msgs_per_s,omitempty"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb,omitempty"`
	LatRounds   int     `json:"latency_rounds"`
	LatMeanus   float64 `json:"latency_mean_us,omitempty"`
	LatP50us    float64 `json:"latency_p50_us,omitempty"`
	LatP99us    float64 `json:"latency_p99_us,omitempty"`
}

// twoProcRow is one size of the two-process comparison.
type twoProcRow struct {
	Size int                `json:"size"`
	Impl map[string]figures `json:"impl"`
	// BWRatio is netio-go's median MB/s over each other contender's;
	// LatRatio netio-go's (and netio-go busy's, under its own name) mean
	// one-way latency over each other's.
	BWRatio  map[string]float64 `json:"netio_bw_ratio"`
	LatRatio map[string]float64 `json:"netio_latency_ratio"`
	// ByRound is netio-go's MB/s over the reference's, round by round (0
	// where one of them failed).
	ByRound []float64 `json:"netio_over_reference_by_round"`
	Modes   *tcpModes `json:"tcp_modes,omitempty"`
}

// tcpModes splits a size's bandwidth rounds by loopback TCP's two modes:
// the reference's rounds fell in two groups, at least modeGap apart, and
// rounds at or above Split MB/s count as the fast mode, for every
// contender alike.
type tcpModes struct {
	Split float64               `json:"split_mb_per_s"`
	Slow  map[string]modeFigure `json:"slow"`
	Fast  map[string]modeFigure `json:"fast"`
}

// modeFigure is a contender's rounds in one mode and their median.
type modeFigure struct {
	Rounds int     `json:"rounds"`
	MBPerS float64 `json:"mb_per_s"`
}

// modeGap is the least ratio between two neighbouring bandwidth rounds of
// the reference (sorted) that says loopback TCP ran in two modes.
const modeGap = 1.3

// summarizeTwoProc computes the two-process rows.
func summarizeTwoProc(samples []sample, sizes []int, rounds int, reference string) []twoProcRow {
	rows := make([]twoProcRow, 0, len(sizes))
	all := append(slices.Clone(impls2p), struct{ id, label string }{impl2pNetioBusy, "netio-go busy"},
		struct{ id, label string }{impl2pNetioInject, "netio-go inject"})
	for _, size := range sizes {
		row := twoProcRow{Size: size, Impl: map[string]figures{}, BWRatio: map[string]float64{}, LatRatio: map[string]float64{}}
		for _, im := range all {
			row.Impl[im.id] = figuresOf(samples, im.id, size)
		}
		netio, busy := row.Impl[impl2pNetio], row.Impl[impl2pNetioBusy]
		for _, im := range impls2p[1:] {
			other := row.Impl[im.id]
			if r := ratio(netio.MBPerS, other.MBPerS); r > 0 {
				row.BWRatio[im.id] = r
			}
			if r := ratio(netio.LatMeanus, other.LatMeanus); r > 0 {
				row.LatRatio[im.id] = r
			}
			if r := ratio(busy.LatMeanus, other.LatMeanus); r > 0 {
				row.LatRatio[impl2pNetioBusy+"/"+im.id] = r
			}
		}
		mine, ref := bandwidthByRound(samples, impl2pNetio, size), bandwidthByRound(samples, reference, size)
		for round := 1; round <= rounds; round++ {
			row.ByRound = append(row.ByRound, ratio(mine[round], ref[round]))
		}
		row.Modes = splitModes(samples, size, reference)
		rows = append(rows, row)
	}
	return rows
}

// figuresOf returns an implementation's medians at one size.
func figuresOf(samples []sample, impl string, size int) figures {
	var f figures
	bw, pp := key{impl, modeBandwidth, size, 0}, key{impl, modePingPong, size, 0}
	f.MBPerS, f.Rounds = medianOf(samples, bw, func(s sample) float64 { return s.MBPerS })
	if f.Rounds > 0 {
		sp := spanOf(bandwidthByRound(samples, impl, size))
		f.MBPerSMin, f.MBPerSMax = sp.Min, sp.Max
		f.MsgsPerS, _ = medianOf(samples, bw, func(s sample) float64 { return s.MsgsPerS })
		f.CPUSecPerGB = positiveMedian(samples, bw, func(s sample) float64 { return s.CPUSecPerGB })
	}
	f.LatMeanus, f.LatRounds = medianOf(samples, pp, func(s sample) float64 { return s.LatMeanus })
	f.LatP50us = positiveMedian(samples, pp, func(s sample) float64 { return s.LatP50us })
	f.LatP99us = positiveMedian(samples, pp, func(s sample) float64 { return s.LatP99us })
	return f
}

// positiveMedian is the median of the positive values only (a figure a
// contender does not report is 0).
func positiveMedian(samples []sample, k key, value func(sample) float64) float64 {
	var xs []float64
	for s := range successful(samples, k) {
		if v := value(s); v > 0 {
			xs = append(xs, v)
		}
	}
	m, _ := median(xs)
	return m
}

// splitModes returns the two modes at one size when the reference's
// bandwidth rounds fall in two groups at least modeGap apart, else nil.
func splitModes(samples []sample, size int, reference string) *tcpModes {
	var ref []float64
	for _, v := range bandwidthByRound(samples, reference, size) {
		ref = append(ref, v)
	}
	slices.Sort(ref)
	split, gap := 0.0, modeGap
	for i := 1; i < len(ref); i++ {
		if g := ref[i] / ref[i-1]; g >= gap {
			split, gap = math.Sqrt(ref[i]*ref[i-1]), g
		}
	}
	if split == 0 {
		return nil
	}
	m := &tcpModes{Split: split, Slow: map[string]modeFigure{}, Fast: map[string]modeFigure{}}
	for _, im := range impls2p {
		var slow, fast []float64
		for _, v := range bandwidthByRound(samples, im.id, size) {
			if v >= split {
				fast = append(fast, v)
			} else {
				slow = append(slow, v)
			}
		}
		m.Slow[im.id], m.Fast[im.id] = modeFigureOf(slow), modeFigureOf(fast)
	}
	return m
}

func modeFigureOf(xs []float64) modeFigure {
	v, _ := median(xs)
	return modeFigure{Rounds: len(xs), MBPerS: v}
}
