package main

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The inject contender runs netio-perf client --inject, bandwidth only,
// at sizes up to injectMax2p; the plain netio contender does not inject.
func TestInjectContender(t *testing.T) {
	p := &twoProc{t: tools{netioPerf: "netio-perf", provider: "tcp"}}
	var inject *contender
	for _, c := range p.contenders() {
		if c.impl == impl2pNetioInject {
			inject = &c
		}
	}
	require.NotNil(t, inject)
	assert.Equal(t, []string{modeBandwidth}, inject.modes)
	assert.True(t, inject.runs(64))
	assert.False(t, inject.runs(injectMax2p+1))

	spec, err := p.bandwidthSpec(impl2pNetioInject, 64, 1000)
	require.NoError(t, err)
	assert.Contains(t, spec.client("A").args, "--inject")
	assert.NotContains(t, spec.server.args, "--inject")
	spec, err = p.bandwidthSpec(impl2pNetio, 64, 1000)
	require.NoError(t, err)
	assert.False(t, slices.Contains(spec.client("A").args, "--inject"))
}

// The rates table is followed by the inject contender's rate against C's,
// at the sizes it ran, and the JSON rows carry its figures.
func TestInjectRatesPrinted(t *testing.T) {
	samples := []sample{bw(1, impl2pNetioInject, 64, 20), bw(1, impl2pC, 64, 16), bw(1, impl2pC, 4096, 700)}
	rows := summarizeTwoProc(samples, []int{64, 4096}, 1, impl2pC)
	require.Len(t, rows, 2)
	assert.InDelta(t, 20e6/64, rows[0].Impl[impl2pNetioInject].MsgsPerS, 1e-6)
	var out bytes.Buffer
	require.NoError(t, printTwoProcRates(&out, rows))
	assert.Contains(t, out.String(), "netio-go client --inject (SendConfig.Inject) 64 B: 0.3125 Mmsg/s, 1.25x of C's")
	assert.NotContains(t, out.String(), "--inject (SendConfig.Inject) 4 KiB")
}
