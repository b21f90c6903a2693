// Package promstats exports a domain.Manager's stats.Snapshot to
// Prometheus: register a Collector for a manager and every figure of the
// snapshot is scraped under Prometheus' conventions (netio_ prefix, base
// units, _total counters, _bytes, _seconds).
//
// Labels are bounded: provider, endpoint kind, close reason, completion
// status, poller name (cq.Config.Name, one per role) and pool tier index;
// never a key, buffer ID, tag or peer address, which stay in the JSON
// snapshot. Endpoints of one kind are summed, and the counters of closed
// endpoints stay in the sums (stats.Kind), so a counter never goes back
// while the manager lives. Registration caches, pools and pub/sub parts are
// summed over the live ones: closing one can lower their counters, which
// Prometheus' rate() reads as a reset.
//
// The core packages never import Prometheus; this package is the only
// one that does. A scrape takes one snapshot, which reads atomics the data
// path owns: scraping costs the data path nothing.
package promstats

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netio-go/netio/stats"
)

// Source is what a Collector exports: a *domain.Manager.
type Source interface {
	Snapshot() stats.Snapshot
}

// Collector is a prometheus.Collector for one manager. Register one per
// manager; for two managers of one provider in a registry, wrap one of
// them with prometheus.WrapRegistererWith and a label of your own.
type Collector struct {
	src Source
}

// New returns a Collector that exports src's snapshots. A nil src exports
// nothing (a nil *domain.Manager exports zeros).
func New(src Source) *Collector { return &Collector{src: src} }

// Describe sends the descriptor of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range metrics {
		ch <- m.desc
	}
}

// Collect takes a snapshot and sends every metric of it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c == nil || c.src == nil {
		return
	}
	s := c.src.Snapshot()
	for _, m := range metrics {
		m.collect(&s, func(v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(m.desc, m.typ, v, append([]string{s.Provider}, labels...)...)
		})
		if m.histogram {
			for _, p := range s.PollerTotals {
				ch <- histogram(m.desc, p.Callbacks, s.Provider, p.Name)
			}
		}
	}
}

// histogram turns per-bucket counts into Prometheus' cumulative buckets.
func histogram(d *prometheus.Desc, h stats.Histogram, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.SumSeconds, buckets, labels...)
}

// emit sends one value with its labels (after the provider).
type emit func(v float64, labels ...string)

// metric is one exported metric: its descriptor, type and how to read it
// from a snapshot.
type metric struct {
	desc    *prometheus.Desc
	typ     prometheus.ValueType
	collect func(s *stats.Snapshot, e emit)
	// histogram: the callback-time histogram of every poller name,
	// collected apart (collect does nothing).
	histogram bool
}

func newMetric(name, help string, typ prometheus.ValueType, labels []string, collect func(*stats.Snapshot, emit)) metric {
	return metric{desc: prometheus.NewDesc(name, help, append([]string{"provider"}, labels...), nil), typ: typ, collect: collect}
}

func counter(name, help string, labels []string, collect func(*stats.Snapshot, emit)) metric {
	return newMetric(name, help, prometheus.CounterValue, labels, collect)
}

func gauge(name, help string, labels []string, collect func(*stats.Snapshot, emit)) metric {
	return newMetric(name, help, prometheus.GaugeValue, labels, collect)
}

// u and i convert counts for Prometheus.
func u(v uint64) float64 { return float64(v) }
func i[T int | int64](v T) float64 {
	return float64(v)
}

var (
	kindL   = []string{"kind"}
	pollerL = []string{"poller"}
	tierL   = []string{"tier"}
)

// perKind emits one value per endpoint kind, live and closed endpoints
// together.
func perKind(get func(c *stats.Counters) uint64) func(*stats.Snapshot, emit) {
	return func(s *stats.Snapshot, e emit) {
		for _, k := range s.Kinds {
			e(u(get(&k.Counters)), k.Kind)
		}
	}
}

// perKindGauge sums a gauge of the live endpoints by kind (0 for a kind
// with none live).
func perKindGauge(get func(g *stats.Gauges) int) func(*stats.Snapshot, emit) {
	return func(s *stats.Snapshot, e emit) {
		sums := map[string]int{}
		for _, k := range s.Kinds {
			sums[k.Kind] = 0
		}
		for _, ep := range s.Endpoints {
			sums[ep.Kind] += get(&ep.Gauges)
		}
		for _, k := range s.Kinds {
			e(i(sums[k.Kind]), k.Kind)
		}
	}
}

// perPoller emits one value per poller name.
func perPoller(get func(p *stats.Poller) float64) func(*stats.Snapshot, emit) {
	return func(s *stats.Snapshot, e emit) {
		for _, p := range s.PollerTotals {
			e(get(&p), p.Name)
		}
	}
}

// perTier sums a tier figure over the pools by tier index.
func perTier(get func(t *stats.Tier) int) func(*stats.Snapshot, emit) {
	return func(s *stats.Snapshot, e emit) {
		var sums []int
		for _, p := range s.Pools {
			for n, t := range p.Tiers {
				if n == len(sums) {
					sums = append(sums, 0)
				}
				sums[n] += get(&t)
			}
		}
		for n, v := range sums {
			e(i(v), strconv.Itoa(n))
		}
	}
}

// one emits a single value.
func one(get func(s *stats.Snapshot) float64) func(*stats.Snapshot, emit) {
	return func(s *stats.Snapshot, e emit) { e(get(s)) }
}
