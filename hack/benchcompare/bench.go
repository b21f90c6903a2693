package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// bench runs the rounds and collects their samples.
type bench struct {
	cfg      config
	tools    tools
	log      io.Writer // progress and errors
	samples  []sample
	failures int
	noCoal   bool // netio-perf has no coalesce mode: stop asking
	two      *twoProc
}

func newBench(c config, log io.Writer) *bench {
	b := &bench{cfg: c, log: log, tools: tools{netioPerf: c.netioPerf, cbaseline: c.cbaseline,
		fabricTest: c.rawGo, provider: c.provider, duration: c.duration, timeout: c.timeout}}
	self, _ := os.Executable()
	b.two = &twoProc{t: b.tools, fab: findFabtests(c.fabtestsDir), self: self, setup: map[key]setupCost{}, busyPoll: c.busyPoll}
	return b
}

// contender is one implementation measured at one size, in the modes it
// has; it runs at the sizes runs allows (nil: every size).
type contender struct {
	impl    string
	measure func(ctx context.Context, size int) ([]sample, error)
	runs    func(size int) bool
	modes   []string
}

func (b *bench) contenders() []contender {
	goTCP := func(buffered bool) func(context.Context, int) ([]sample, error) {
		return func(ctx context.Context, size int) ([]sample, error) {
			bw, err := tcpBandwidth(ctx, size, buffered, b.cfg.duration)
			if err != nil {
				return nil, err
			}
			pp, err := tcpPingPong(ctx, size, buffered, b.cfg.duration)
			if err != nil {
				return nil, err
			}
			return []sample{bw, pp}, nil
		}
	}
	both := []string{modeBandwidth, modePingPong}
	return []contender{
		{impl: implNetio, measure: b.tools.netio, modes: both},
		{impl: implC, measure: func(ctx context.Context, size int) ([]sample, error) { return b.tools.c(ctx, size, false) }, modes: both},
		{impl: implCYield, measure: func(ctx context.Context, size int) ([]sample, error) { return b.tools.c(ctx, size, true) }, modes: both},
		{impl: implTCP, measure: goTCP(false), modes: both},
		{impl: implBufio, measure: goTCP(true), modes: both},
		{impl: implRawGo, measure: b.tools.rawGo, runs: b.tools.hasRawGo, modes: []string{modeBandwidth}},
	}
}

// run measures every round and returns the report.
func (b *bench) run(ctx context.Context) *report {
	start, load := time.Now(), loadAverage(procLoadavg)
	b.runTwoProc(ctx)
	cs := b.contenders()
	for round := 1; round <= b.cfg.rounds && b.cfg.oneProcess && ctx.Err() == nil; round++ {
		b.measureRound(ctx, round, b.cfg.rounds, cs)
		b.progress(round, implNetio+" scale", b.cfg.scaleSize)
		got, err := b.tools.scale(ctx, b.cfg.scaleSize, b.cfg.conns)
		b.record(round, implNetio, []string{modeScale}, b.cfg.scaleSize, got, err)
		b.coalesced(ctx, round)
	}
	r := b.report(start)
	r.Machine.LoadStart = load
	return r
}

// measureRound measures every size with every contender once, the order
// rotating by size and round: no implementation always runs first, right
// after another one's teardown.
func (b *bench) measureRound(ctx context.Context, round, rounds int, cs []contender) {
	for i, size := range b.cfg.sizes {
		for j := range cs {
			c := cs[(i+j+round)%len(cs)]
			if c.runs != nil && !c.runs(size) {
				continue
			}
			fmt.Fprintf(b.log, "round %d/%d: %s %s\n", round, rounds, c.impl, formatSize(size))
			got, err := c.measure(ctx, size)
			b.record(round, c.impl, c.modes, size, got, err)
		}
	}
}

// runTwoProc measures the two-process rounds, if any.
func (b *bench) runTwoProc(ctx context.Context) {
	if b.cfg.twoRounds == 0 {
		return
	}
	if b.two.fab.bw == "" {
		fmt.Fprintf(b.log, "fabtests' fi_msg_bw and fi_msg_pingpong not found (%s or PATH): the two-process tables leave them out\n", FabtestsEnv)
	}
	cs := b.two.contenders()
	for round := 1; round <= b.cfg.twoRounds && ctx.Err() == nil; round++ {
		b.measureRound(ctx, round, b.cfg.twoRounds, cs)
	}
}

// procLoadavg is where Linux tells the load averages.
const procLoadavg = "/proc/loadavg"

// coalesced measures the coalesced row, unless netio-perf said it has no
// such mode.
func (b *bench) coalesced(ctx context.Context, round int) {
	if b.noCoal {
		return
	}
	b.progress(round, implNetio+" coalesced", coalescedSize)
	s, err := b.tools.coalesced(ctx)
	if s.NotBuilt {
		fmt.Fprintf(b.log, "  netio-perf has no --mode %s yet: coalesced row n/a (not built)\n", coalesceMode)
		b.noCoal = true
	}
	var got []sample
	if err == nil {
		got = []sample{s}
	}
	b.record(round, implNetio, []string{modeCoalesced}, coalescedSize, got, err)
}

func (b *bench) progress(round int, what string, size int) {
	fmt.Fprintf(b.log, "round %d/%d: %s %s\n", round, b.cfg.rounds, what, formatSize(size))
}

// record keeps the samples of one measurement, or on error one failed sample
// per mode it would have given.
func (b *bench) record(round int, impl string, modes []string, size int, got []sample, err error) {
	if err != nil {
		b.failures++
		fmt.Fprintf(b.log, "  FAILED: %v\n", err)
		for _, m := range modes {
			b.samples = append(b.samples, sample{Round: round, Impl: impl, Mode: m, Size: size, Error: err.Error()})
		}
		return
	}
	for _, s := range got {
		s.Round = round
		if s.measuredNothing() {
			b.failures++
			s.Error = "nothing measured"
			fmt.Fprintf(b.log, "  FAILED: %s %s %s: nothing measured\n", s.Impl, s.Mode, formatSize(s.Size))
		}
		b.samples = append(b.samples, s)
	}
}

// report summarizes the samples.
func (b *bench) report(start time.Time) *report {
	c := b.cfg
	r := &report{
		Started: start, WallSeconds: time.Since(start).Seconds(), Machine: thisMachine(procLoadavg),
		Provider: c.provider, Rounds: c.rounds, DurationS: c.duration.Seconds(), Sizes: c.sizes,
		ScaleSize: c.scaleSize, ScaleConns: c.conns, Windows: map[int]window{},
		Samples: b.samples, Failures: b.failures, OneProcess: c.oneProcess,
	}
	if c.twoRounds > 0 {
		r.TwoProcess = b.two.report(b.samples, c.sizes, c.twoRounds)
	}
	for _, size := range c.sizes {
		r.Windows[size] = windowFor(size)
	}
	r.Summary = summarize(b.samples, c.sizes)
	r.Coalesced = summarizeCoalesced(b.samples)
	r.Scale = summarizeScale(b.samples, c.scaleSize, c.conns)
	r.RawGo = summarizeRawGo(b.samples, c.sizes)
	r.Spread = summarizeSpread(b.samples, c.sizes)
	return r
}
