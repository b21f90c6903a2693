package main

import (
	"iter"
	"maps"
	"slices"
)

// Implementations compared; netio-go is the one every ratio is about.
const (
	implNetio  = "netio-go"
	implC      = "c-libfabric"       // spins on fi_cq_read
	implCYield = "c-libfabric-yield" // the same, sched_yield() after an empty poll
	implTCP    = "go-tcp"
	implBufio  = "go-tcp-bufio"

	// implRawGo is no contender but a yardstick, kept out of impls: a Go
	// program in the C baseline's exact shape on netio-go's fabric package
	// alone (BenchmarkRawStream). Where it falls short of C, that share of
	// a gap is Go's (cgo calls, the runtime's threads), not the library's.
	// It bounds nothing where netio-go beats it.
	implRawGo = "go-fabric-raw"
)

// impls lists the implementations in table order, with their column labels.
var impls = []struct{ id, label string }{
	{implNetio, "netio-go"},
	{implC, "C"},
	{implCYield, "C+yield"},
	{implTCP, "TCP"},
	{implBufio, "TCP+bufio"},
}

// What a sample measured.
const (
	modeBandwidth = "bandwidth" // a window of messages one way: MB/s, msg/s, CPU s/GB
	modePingPong  = "pingpong"  // one message bounced: one-way latency
	modeScale     = "scale"     // netio-go, N connections into one receiver
	modeCoalesced = "coalesced" // netio-go, coalesced 64 B messages: msg/s
)

// sample is one measurement of one round: the raw numbers the JSON keeps.
// A failed measurement carries Error and no figures; a coalesced row whose
// mode netio-perf does not have yet carries NotBuilt.
type sample struct {
	Round       int     `json:"round"`
	Impl        string  `json:"impl"`
	Mode        string  `json:"mode"`
	Size        int     `json:"size"`
	Connections int     `json:"connections,omitempty"`
	Messages    uint64  `json:"messages,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
	MBPerS      float64 `json:"mb_per_s,omitempty"`
	MsgsPerS    float64 `json:"msgs_per_s,omitempty"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb,omitempty"`
	RoundTrips  int     `json:"round_trips,omitempty"`
	LatP50us    float64 `json:"latency_p50_us,omitempty"`
	LatP99us    float64 `json:"latency_p99_us,omitempty"`
	LatMeanus   float64 `json:"latency_mean_us,omitempty"` // two-process ping-pongs (fabtests gives only this)
	NotBuilt    bool    `json:"not_built,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// ok reports whether the sample holds figures.
func (s sample) ok() bool { return s.Error == "" && !s.NotBuilt }

// measuredNothing reports whether a sample that claims success has no
// figures: no message moved, or no round trip timed.
func (s sample) measuredNothing() bool {
	if !s.ok() {
		return false
	}
	if s.Mode == modePingPong {
		return s.RoundTrips == 0 || (s.LatP50us <= 0 && s.LatMeanus <= 0)
	}
	return s.MsgsPerS <= 0
}

// key identifies what was measured, over all rounds.
type key struct {
	impl, mode  string
	size, conns int
}

func (s sample) key() key { return key{s.Impl, s.Mode, s.Size, s.Connections} }

// median returns the median of xs, the mean of the middle two for an even
// count, and false when xs is empty. xs is not changed.
func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid], true
	}
	return (s[mid-1] + s[mid]) / 2, true
}

// successful yields the samples of k that measured something: the ones
// every median, spread and ratio is made of.
func successful(samples []sample, k key) iter.Seq[sample] {
	return func(yield func(sample) bool) {
		for _, s := range samples {
			if s.ok() && s.key() == k && !yield(s) {
				return
			}
		}
	}
}

// medianOf returns the median of value over the successful samples of k, and
// how many there were.
func medianOf(samples []sample, k key, value func(sample) float64) (float64, int) {
	var xs []float64
	for s := range successful(samples, k) {
		xs = append(xs, value(s))
	}
	m, _ := median(xs)
	return m, len(xs)
}

// ratio returns a/b, or 0 (shown as "-") when either is missing or not
// positive.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// metric is one figure the summary compares across implementations.
type metric struct {
	name          string  // JSON name
	title         string  // table heading
	mode          string  // the samples that carry it
	scale         float64 // table value = raw value × scale
	format        string  // table value format
	lowerIsBetter bool
	value         func(sample) float64
}

// metrics are the sections of the comparison, in table order.
var metrics = []metric{
	{name: "mb_per_s", title: "bandwidth, MB/s (higher is better: ratio > 1 means netio-go is faster)",
		mode: modeBandwidth, scale: 1, format: "%.1f", value: func(s sample) float64 { return s.MBPerS }},
	{name: "msgs_per_s", title: "message rate, Mmsg/s (same runs as the bandwidth)",
		mode: modeBandwidth, scale: 1e-6, format: "%.4f", value: func(s sample) float64 { return s.MsgsPerS }},
	{name: "latency_p50_us", title: "ping-pong one-way latency (RTT/2), median of the per-round p50, µs (lower is better: ratio < 1 means netio-go is faster)",
		mode: modePingPong, scale: 1, format: "%.1f", lowerIsBetter: true, value: func(s sample) float64 { return s.LatP50us }},
	{name: "cpu_s_per_gb", title: "CPU per GB moved in the bandwidth runs, s/GB (user+sys of the measuring process, both sides; lower is better)",
		mode: modeBandwidth, scale: 1, format: "%.3f", lowerIsBetter: true, value: func(s sample) float64 { return s.CPUSecPerGB }},
}

// section is one metric's medians per size and implementation, with
// netio-go's median over each other implementation's.
type section struct {
	Metric        string       `json:"metric"`
	Title         string       `json:"title"`
	LowerIsBetter bool         `json:"lower_is_better"`
	Rows          []sectionRow `json:"rows"`
}

// sectionRow is one size of a section. An implementation with no successful
// round is absent from Median and Ratio.
type sectionRow struct {
	Size   int                `json:"size"`
	Median map[string]float64 `json:"median"`
	Rounds map[string]int     `json:"rounds"`
	Ratio  map[string]float64 `json:"netio_ratio"`
}

// summarize computes every section for the sizes.
func summarize(samples []sample, sizes []int) []section {
	out := make([]section, 0, len(metrics))
	for _, m := range metrics {
		sec := section{Metric: m.name, Title: m.title, LowerIsBetter: m.lowerIsBetter}
		for _, size := range sizes {
			sec.Rows = append(sec.Rows, summarizeRow(samples, m, size))
		}
		out = append(out, sec)
	}
	return out
}

func summarizeRow(samples []sample, m metric, size int) sectionRow {
	row := sectionRow{Size: size, Median: map[string]float64{}, Rounds: map[string]int{}, Ratio: map[string]float64{}}
	for _, im := range impls {
		v, n := medianOf(samples, key{im.id, m.mode, size, 0}, m.value)
		row.Rounds[im.id] = n
		if n > 0 {
			row.Median[im.id] = v
		}
	}
	for _, im := range impls[1:] {
		if r := ratio(row.Median[implNetio], row.Median[im.id]); r > 0 {
			row.Ratio[im.id] = r
		}
	}
	return row
}

// coalescedSize is the message size of the coalesced row.
const coalescedSize = 64

// coalescedRow is netio-go's coalesced 64 B message rate against the
// uncoalesced 64 B message rates of the others.
type coalescedRow struct {
	Status   string             `json:"status"` // "ok", "not built" or "failed"
	MsgsPerS float64            `json:"msgs_per_s,omitempty"`
	Ratio    map[string]float64 `json:"ratio,omitempty"` // over C, TCP and TCP+bufio at 64 B
}

// Statuses of the coalesced row.
const (
	statusOK       = "ok"
	statusNotBuilt = "not built"
	statusFailed   = "failed"
)

// summarizeCoalesced computes the coalesced row.
func summarizeCoalesced(samples []sample) coalescedRow {
	msgs := func(s sample) float64 { return s.MsgsPerS }
	v, n := medianOf(samples, key{implNetio, modeCoalesced, coalescedSize, 0}, msgs)
	if n == 0 {
		for _, s := range samples {
			if s.Mode == modeCoalesced && s.NotBuilt {
				return coalescedRow{Status: statusNotBuilt}
			}
		}
		return coalescedRow{Status: statusFailed}
	}
	row := coalescedRow{Status: statusOK, MsgsPerS: v, Ratio: map[string]float64{}}
	for _, im := range impls[1:] {
		base, _ := medianOf(samples, key{im.id, modeBandwidth, coalescedSize, 0}, msgs)
		if r := ratio(v, base); r > 0 {
			row.Ratio[im.id] = r
		}
	}
	return row
}

// scaleRow is the medians of netio-go with one connection count.
type scaleRow struct {
	Connections int     `json:"connections"`
	Size        int     `json:"size"`
	Rounds      int     `json:"rounds"`
	MBPerS      float64 `json:"mb_per_s"`
	MsgsPerS    float64 `json:"msgs_per_s"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb"`
}

// summarizeScale computes one row per connection count.
func summarizeScale(samples []sample, size int, conns []int) []scaleRow {
	rows := make([]scaleRow, 0, len(conns))
	for _, c := range conns {
		k := key{implNetio, modeScale, size, c}
		row := scaleRow{Connections: c, Size: size}
		row.MBPerS, row.Rounds = medianOf(samples, k, func(s sample) float64 { return s.MBPerS })
		row.MsgsPerS, _ = medianOf(samples, k, func(s sample) float64 { return s.MsgsPerS })
		row.CPUSecPerGB, _ = medianOf(samples, k, func(s sample) float64 { return s.CPUSecPerGB })
		rows = append(rows, row)
	}
	return rows
}

// rawGoRow is raw Go's bandwidth at one size, against C and
// netio-go in the same rounds.
type rawGoRow struct {
	Size        int     `json:"size"`
	Rounds      int     `json:"rounds"`
	MBPerS      float64 `json:"mb_per_s"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb"`
	OverC       float64 `json:"over_c,omitempty"`     // raw Go / C
	NetioOver   float64 `json:"netio_over,omitempty"` // netio-go / raw Go
}

// summarizeRawGo computes a row for every size with a raw Go
// sample.
func summarizeRawGo(samples []sample, sizes []int) []rawGoRow {
	mb := func(s sample) float64 { return s.MBPerS }
	var rows []rawGoRow
	for _, size := range sizes {
		k := key{implRawGo, modeBandwidth, size, 0}
		row := rawGoRow{Size: size}
		if row.MBPerS, row.Rounds = medianOf(samples, k, mb); row.Rounds == 0 {
			continue
		}
		row.CPUSecPerGB, _ = medianOf(samples, k, func(s sample) float64 { return s.CPUSecPerGB })
		c, _ := medianOf(samples, key{implC, modeBandwidth, size, 0}, mb)
		netio, _ := medianOf(samples, key{implNetio, modeBandwidth, size, 0}, mb)
		row.OverC, row.NetioOver = ratio(row.MBPerS, c), ratio(netio, row.MBPerS)
		rows = append(rows, row)
	}
	return rows
}

// span is the lowest and highest of a figure over the rounds.
type span struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// spanOf returns the span of a figure by round; byRound must not be empty.
func spanOf(byRound map[int]float64) span {
	xs := slices.Collect(maps.Values(byRound))
	return span{slices.Min(xs), slices.Max(xs)}
}

// spreadRow is how far netio-go's and C's bandwidth at one size moved over
// the rounds each of them measured, and netio-go/C within each round.
// Rounds are interleaved, so a round's ratio compares runs made seconds
// apart: a median ratio is a difference between the two only when the
// per-round ratios agree with it, not when they straddle 1.
type spreadRow struct {
	Size  int  `json:"size"`
	Netio span `json:"netio_mb_per_s"`
	C     span `json:"c_mb_per_s"`
	// Ratios holds netio-go / C for rounds 1, 2, ... up to the last round
	// either measured; 0 where one of them failed that round.
	Ratios []float64 `json:"ratios_by_round"`
}

// summarizeSpread computes a row for every size where netio-go and C both
// have a successful bandwidth round.
func summarizeSpread(samples []sample, sizes []int) []spreadRow {
	var rows []spreadRow
	for _, size := range sizes {
		netio := bandwidthByRound(samples, implNetio, size)
		c := bandwidthByRound(samples, implC, size)
		if len(netio) == 0 || len(c) == 0 {
			continue
		}
		row := spreadRow{Size: size, Netio: spanOf(netio), C: spanOf(c)}
		last := max(slices.Max(slices.Collect(maps.Keys(netio))), slices.Max(slices.Collect(maps.Keys(c))))
		for round := 1; round <= last; round++ {
			row.Ratios = append(row.Ratios, ratio(netio[round], c[round]))
		}
		rows = append(rows, row)
	}
	return rows
}

// bandwidthByRound returns an implementation's MB/s at one size by round,
// successful rounds only.
func bandwidthByRound(samples []sample, impl string, size int) map[int]float64 {
	out := map[int]float64{}
	for s := range successful(samples, key{impl, modeBandwidth, size, 0}) {
		out[s.Round] = s.MBPerS
	}
	return out
}
