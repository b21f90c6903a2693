package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	_, ok := median(nil)
	assert.False(t, ok)
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{10, 1, 4, 2}, 3}, // mean of the middle two
		{[]float64{7, 7, 100, 1, 7}, 7},
	} {
		in := append([]float64(nil), c.in...)
		got, ok := median(in)
		assert.True(t, ok)
		assert.InDelta(t, c.want, got, 1e-12, "%v", c.in)
		assert.Equal(t, c.in, in, "median must not reorder its input")
	}
}

func TestRatio(t *testing.T) {
	assert.InDelta(t, 0.5, ratio(1, 2), 1e-12)
	assert.Zero(t, ratio(1, 0))
	assert.Zero(t, ratio(0, 2))
	assert.Zero(t, ratio(-1, 2))
}

// bw and pp build samples for the tests.
func bw(round int, impl string, size int, mbps float64) sample {
	return sample{Round: round, Impl: impl, Mode: modeBandwidth, Size: size, MBPerS: mbps, MsgsPerS: mbps * 1e6 / float64(size), CPUSecPerGB: 1}
}

func pp(round int, impl string, size int, p50 float64) sample {
	return sample{Round: round, Impl: impl, Mode: modePingPong, Size: size, RoundTrips: 100, LatP50us: p50, LatP99us: 2 * p50}
}

func TestMedianOfSkipsFailuresAndOtherKeys(t *testing.T) {
	samples := []sample{
		bw(1, implNetio, 64, 10),
		bw(2, implNetio, 64, 30),
		bw(3, implNetio, 64, 20),
		{Round: 4, Impl: implNetio, Mode: modeBandwidth, Size: 64, Error: "boom"},
		bw(1, implNetio, 4096, 1000), // another size
		bw(1, implC, 64, 99),         // another implementation
		pp(1, implNetio, 64, 5),      // another mode
	}
	got, n := medianOf(samples, key{implNetio, modeBandwidth, 64, 0}, func(s sample) float64 { return s.MBPerS })
	assert.Equal(t, 3, n)
	assert.InDelta(t, 20, got, 1e-12)
}

func TestSummarizeRatios(t *testing.T) {
	var samples []sample
	for r, f := range []float64{1, 2, 3} { // medians: netio 200, C 100, TCP 400, bufio 800
		samples = append(samples,
			bw(r+1, implNetio, 4096, 200*f/2),
			bw(r+1, implC, 4096, 100*f/2),
			bw(r+1, implTCP, 4096, 400*f/2),
			bw(r+1, implBufio, 4096, 800*f/2),
			pp(r+1, implNetio, 4096, 6*f/2),
			pp(r+1, implC, 4096, 4*f/2),
		)
	}
	samples = append(samples, sample{Round: 1, Impl: implTCP, Mode: modePingPong, Size: 4096, Error: "refused"})
	secs := summarize(samples, []int{4096})
	require.Len(t, secs, len(metrics))

	mb := secs[0]
	assert.Equal(t, "mb_per_s", mb.Metric)
	require.Len(t, mb.Rows, 1)
	row := mb.Rows[0]
	assert.InDelta(t, 200, row.Median[implNetio], 1e-9)
	assert.InDelta(t, 2.0, row.Ratio[implC], 1e-9)
	assert.InDelta(t, 0.5, row.Ratio[implTCP], 1e-9)
	assert.InDelta(t, 0.25, row.Ratio[implBufio], 1e-9)
	assert.Equal(t, 3, row.Rounds[implC])

	rate := secs[1].Rows[0] // msg/s ratios equal the MB/s ones at one size
	assert.InDelta(t, 200e6/4096, rate.Median[implNetio], 1e-6)
	assert.InDelta(t, 2.0, rate.Ratio[implC], 1e-9)

	lat := secs[2]
	assert.True(t, lat.LowerIsBetter)
	lrow := lat.Rows[0]
	assert.InDelta(t, 1.5, lrow.Ratio[implC], 1e-9, "netio 6 µs over C 4 µs")
	assert.NotContains(t, lrow.Median, implTCP, "every TCP ping-pong failed")
	assert.NotContains(t, lrow.Ratio, implTCP)
	assert.Zero(t, lrow.Rounds[implTCP])
}

func TestSummarizeCoalesced(t *testing.T) {
	base := []sample{bw(1, implC, 64, 12.8), bw(1, implTCP, 64, 64), bw(1, implBufio, 64, 640)} // 0.2, 1, 10 Mmsg/s

	notBuilt := append(base, sample{Round: 1, Impl: implNetio, Mode: modeCoalesced, Size: 64, NotBuilt: true})
	assert.Equal(t, coalescedRow{Status: statusNotBuilt}, summarizeCoalesced(notBuilt))

	failed := append(base, sample{Round: 1, Impl: implNetio, Mode: modeCoalesced, Size: 64, Error: "x"})
	assert.Equal(t, statusFailed, summarizeCoalesced(failed).Status)

	ok := append(base,
		sample{Round: 1, Impl: implNetio, Mode: modeCoalesced, Size: 64, MsgsPerS: 10e6},
		sample{Round: 2, Impl: implNetio, Mode: modeCoalesced, Size: 64, MsgsPerS: 12e6},
		sample{Round: 3, Impl: implNetio, Mode: modeCoalesced, Size: 64, MsgsPerS: 20e6})
	row := summarizeCoalesced(ok)
	assert.Equal(t, statusOK, row.Status)
	assert.InDelta(t, 12e6, row.MsgsPerS, 1e-3)
	assert.InDelta(t, 60, row.Ratio[implC], 1e-9)
	assert.InDelta(t, 12, row.Ratio[implTCP], 1e-9)
	assert.InDelta(t, 1.2, row.Ratio[implBufio], 1e-9)
}

func TestSummarizeScale(t *testing.T) {
	samples := []sample{
		{Round: 1, Impl: implNetio, Mode: modeScale, Size: 4096, Connections: 4, MBPerS: 100, MsgsPerS: 1, CPUSecPerGB: 3},
		{Round: 2, Impl: implNetio, Mode: modeScale, Size: 4096, Connections: 4, MBPerS: 300, MsgsPerS: 2, CPUSecPerGB: 1},
		{Round: 1, Impl: implNetio, Mode: modeScale, Size: 4096, Connections: 64, Error: "x"},
		{Round: 1, Impl: implNetio, Mode: modeBandwidth, Size: 4096, MBPerS: 999},
	}
	rows := summarizeScale(samples, 4096, []int{1, 4, 64})
	require.Len(t, rows, 3)
	assert.Equal(t, scaleRow{Connections: 1, Size: 4096}, rows[0], "no scale sample with 1 connection")
	assert.Equal(t, scaleRow{Connections: 4, Size: 4096, Rounds: 2, MBPerS: 200, MsgsPerS: 1.5, CPUSecPerGB: 2}, rows[1])
	assert.Zero(t, rows[2].Rounds)
}

// Raw Go gets a row only at sizes it was measured, with its ratio
// to C and netio-go's ratio to it from the medians; a size without C keeps
// the row but no ratio to C.
func TestSummarizeRawGo(t *testing.T) {
	const k64, m1 = 64 << 10, 1 << 20
	ceil := func(round, size int, mbps, cpu float64) sample {
		s := bw(round, implRawGo, size, mbps)
		s.CPUSecPerGB = cpu
		return s
	}
	samples := []sample{
		bw(1, implNetio, k64, 3000), bw(1, implC, k64, 4000),
		ceil(1, k64, 2000, 1.0), ceil(2, k64, 2400, 0.8), ceil(3, k64, 9000, 0.2),
		bw(1, implNetio, m1, 5000),
		ceil(1, m1, 6000, 0.3), {Round: 2, Impl: implRawGo, Mode: modeBandwidth, Size: m1, Error: "x"},
		bw(1, implC, 4096, 1000),
	}
	rows := summarizeRawGo(samples, []int{4096, k64, m1})
	require.Len(t, rows, 2, "no raw Go sample at 4 KiB")
	assert.Equal(t, k64, rows[0].Size)
	assert.Equal(t, 3, rows[0].Rounds)
	assert.InDelta(t, 2400, rows[0].MBPerS, 1e-9)
	assert.InDelta(t, 0.8, rows[0].CPUSecPerGB, 1e-9)
	assert.InDelta(t, 0.6, rows[0].OverC, 1e-9)
	assert.InDelta(t, 1.25, rows[0].NetioOver, 1e-9)
	assert.Equal(t, rawGoRow{Size: m1, Rounds: 1, MBPerS: 6000, CPUSecPerGB: 0.3, NetioOver: 5000.0 / 6000}, rows[1])
}

func TestSummarizeSpread(t *testing.T) {
	const k64 = 64 << 10
	samples := []sample{
		bw(1, implNetio, k64, 3000), bw(1, implC, k64, 2000),
		bw(2, implNetio, k64, 2500), bw(2, implC, k64, 5000),
		bw(3, implNetio, k64, 2800), {Round: 3, Impl: implC, Mode: modeBandwidth, Size: k64, Error: "boom"},
		bw(4, implC, k64, 4000),     // no netio-go sample in round 4: no ratio
		bw(1, implCYield, k64, 100), // not C: no part of the spread
		bw(1, implNetio, 64, 40),    // C has no 64 B round: no row
	}
	rows := summarizeSpread(samples, []int{64, k64, 1 << 20})
	require.Len(t, rows, 1)
	r := rows[0]
	assert.Equal(t, k64, r.Size)
	assert.Equal(t, span{2500, 3000}, r.Netio)
	assert.Equal(t, span{2000, 5000}, r.C, "the failed round is no low")
	assert.InDeltaSlice(t, []float64{1.5, 0.5, 0, 0}, r.Ratios, 1e-12,
		"by round: rounds 3 (C failed) and 4 (no netio-go) keep their places, as 0")
}
