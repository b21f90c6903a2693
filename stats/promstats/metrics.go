package promstats

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netio-go/netio/stats"
)

// metrics is every metric a Collector exports, in the order of the
// snapshot's sections.
var metrics = concat(registrationMetrics, endpointMetrics, pollerMetrics, poolMetrics, pubsubMetrics)

func concat(lists ...[]metric) []metric {
	var out []metric
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var registrationMetrics = []metric{
	gauge("netio_registrations", "Live memory registrations of the domain.", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.Count) })),
	gauge("netio_registered_bytes", "Bytes of the live memory registrations.", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.Bytes) })),
	gauge("netio_registrations_peak", "High-water mark of live memory registrations.", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.PeakCount) })),
	gauge("netio_registered_peak_bytes", "High-water mark of registered bytes.", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.PeakBytes) })),
	gauge("netio_registrations_limit", "Limit on live registrations (0: none).", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.MaxCount) })),
	gauge("netio_registered_limit_bytes", "Limit on registered bytes (0: none).", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.MaxBytes) })),
	counter("netio_registrations_refused_total", "Registrations refused because of a limit.", nil,
		one(func(s *stats.Snapshot) float64 { return i(s.Registrations.Refused) })),
	counter("netio_regcache_hits_total", "Registration cache lookups served by a cached registration (live caches).", nil,
		one(func(s *stats.Snapshot) float64 { return sumCaches(s, func(c stats.Cache) uint64 { return c.Hits }) })),
	counter("netio_regcache_misses_total", "Registration cache lookups that registered memory (live caches).", nil,
		one(func(s *stats.Snapshot) float64 { return sumCaches(s, func(c stats.Cache) uint64 { return c.Misses }) })),
	counter("netio_regcache_merges_total", "Registration cache misses that merged entries (live caches).", nil,
		one(func(s *stats.Snapshot) float64 { return sumCaches(s, func(c stats.Cache) uint64 { return c.Merges }) })),
	counter("netio_regcache_evictions_total", "Stale cached registrations deregistered for a limit (live caches).", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumCaches(s, func(c stats.Cache) uint64 { return c.Evictions })
		})),
	gauge("netio_regcache_entries", "Cached registrations by state (in_use, stale).", []string{"state"},
		func(s *stats.Snapshot, e emit) {
			var inUse, stale int
			for _, c := range s.Caches {
				inUse += c.InUse
				stale += c.Stale
			}
			e(i(inUse), "in_use")
			e(i(stale), "stale")
		}),
}

func sumCaches(s *stats.Snapshot, get func(stats.Cache) uint64) float64 {
	var n uint64
	for _, c := range s.Caches {
		n += get(c)
	}
	return u(n)
}

var endpointMetrics = []metric{
	gauge("netio_endpoints", "Endpoints open now, by kind.", kindL,
		func(s *stats.Snapshot, e emit) {
			for _, k := range s.Kinds {
				e(i(k.Live), k.Kind)
			}
		}),
	counter("netio_endpoints_opened_total", "Endpoints opened, by kind.", kindL,
		func(s *stats.Snapshot, e emit) {
			for _, k := range s.Kinds {
				e(u(k.Opened), k.Kind)
			}
		}),
	counter("netio_endpoints_closed_total", "Endpoints closed, by kind and reason (local, peer, timeout, error).", []string{"kind", "reason"},
		func(s *stats.Snapshot, e emit) {
			for _, k := range s.Kinds {
				for _, r := range []string{stats.ReasonLocal, stats.ReasonPeer, stats.ReasonTimeout, stats.ReasonError} {
					e(u(k.Closed[r]), k.Kind, r)
				}
			}
		}),
	counter("netio_messages_sent_total", "Messages posted for sending (reconnecting: handed over).", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.MessagesSent })),
	counter("netio_sent_bytes_total", "Bytes of the messages sent.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.BytesSent })),
	counter("netio_send_completions_total", "Sends reported, by status (ok, failed, canceled).", []string{"kind", "status"},
		func(s *stats.Snapshot, e emit) {
			for _, k := range s.Kinds {
				e(u(k.SendsCompleted), k.Kind, "ok")
				e(u(k.SendsFailed), k.Kind, "failed")
				e(u(k.SendsCanceled), k.Kind, "canceled")
			}
		}),
	gauge("netio_pending_sends", "Sends posted and not yet reported.", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.PendingSends })),
	counter("netio_messages_received_total", "Messages received.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.MessagesReceived })),
	counter("netio_received_bytes_total", "Bytes of the messages received.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.BytesReceived })),
	counter("netio_receive_errors_total", "Receives that completed with an error.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.ReceiveErrors })),
	gauge("netio_buffers", "Send or receive buffers of the live endpoints (zerocopy: header slots).", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.Buffers })),
	gauge("netio_free_buffers", "Of those, free now.", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.FreeBuffers })),
	gauge("netio_min_free_buffers", "Fewest free buffers since the previous scrape, summed over the live endpoints.", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.MinFreeBuffers })),
	gauge("netio_peers", "Known peers of connectionless endpoints.", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.Peers })),
	gauge("netio_inject_confirms_held", "Tracked injects in flight of connectionless endpoints, each holding a confirm slot until it completes or the endpoint closes.", kindL,
		perKindGauge(func(g *stats.Gauges) int { return g.InjectConfirmsHeld })),
	counter("netio_coalesced_messages_total", "Messages sent in coalesced buffers.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.CoalescedMessages })),
	counter("netio_coalesced_buffers_total", "Coalesced buffers posted (messages per buffer: the ratio of the two).", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.CoalescedBuffers })),
	counter("netio_coalesce_dropped_messages_total", "Messages taken for coalescing and never posted (the connection ended).", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.CoalesceDropped })),
	counter("netio_decoded_messages_total", "Messages decoded from received coalesced buffers.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.DecodedMessages })),
	counter("netio_malformed_buffers_total", "Received buffers that broke the coalesced format.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.MalformedBuffers })),
	counter("netio_connections_established_total", "Connections established by reconnecting senders.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.Connections })),
	counter("netio_reconnects_total", "Connections established by reconnecting senders after their first.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.Reconnects })),
	counter("netio_dial_errors_total", "Dials of reconnecting senders that failed.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.DialErrors })),
	counter("netio_injects_unconfirmed_total", "Injects the provider took that nothing confirmed sent before their endpoint closed or peer was removed (rdm), or before a connected sender with Inject closed.", kindL,
		perKind(func(c *stats.Counters) uint64 { return c.InjectsUnconfirmed })),
	counter("netio_connections_accepted_total", "Connection requests listeners accepted.", nil,
		one(func(s *stats.Snapshot) float64 { return u(s.ListenerTotals.Accepted) })),
	counter("netio_connections_refused_total", "Connection requests listeners rejected (Admit, MaxConnections, no buffers).", nil,
		one(func(s *stats.Snapshot) float64 { return u(s.ListenerTotals.Refused) })),
	gauge("netio_listeners", "Listeners open now.", nil,
		one(func(s *stats.Snapshot) float64 { return i(len(s.Listeners)) })),
}

var pollerMetrics = []metric{
	gauge("netio_pollers", "Pollers running now, by name.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return i(p.Live) })),
	counter("netio_poller_completions_total", "Successful completions delivered.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Completions) })),
	counter("netio_poller_error_completions_total", "Error completions delivered.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Errors) })),
	counter("netio_poller_events_total", "Connection events delivered.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Events) })),
	counter("netio_poller_dropped_total", "Completions or events whose endpoint was gone.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Dropped) })),
	counter("netio_poller_unreported_total", "Error completions of counted injects, flushed by a close or a broken connection (counted in the endpoint's InjectsUnconfirmed).", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Unreported) })),
	counter("netio_poller_spins_total", "Poll rounds that found nothing to do (CPU spent spinning).", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Spins) })),
	counter("netio_poller_blocks_total", "Times a poller blocked on its queues' descriptors.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Blocks) })),
	counter("netio_poller_wakeups_total", "Blocks ended by a ready descriptor.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.WakeUps) })),
	counter("netio_poller_timeouts_total", "Blocks ended by MaxBlock.", pollerL,
		perPoller(func(p *stats.Poller) float64 { return u(p.Timeouts) })),
	{desc: prometheus.NewDesc("netio_poller_callback_seconds", "Time a poller spent in the callbacks of one batch of completions (one batch in 16 is timed).",
		[]string{"provider", "poller"}, nil), collect: func(*stats.Snapshot, emit) {}, histogram: true},
}

var poolMetrics = []metric{
	gauge("netio_pool_buffers", "Registered buffers of the pools, by tier index.", tierL,
		perTier(func(t *stats.Tier) int { return t.Count })),
	gauge("netio_pool_free_buffers", "Free buffers of the pools, by tier index.", tierL,
		perTier(func(t *stats.Tier) int { return t.Free })),
	gauge("netio_pool_min_free_buffers", "Fewest free buffers since the previous scrape, by tier index.", tierL,
		perTier(func(t *stats.Tier) int { return t.MinFree })),
	gauge("netio_pool_registered_bytes", "Bytes the pools have registered.", nil,
		one(func(s *stats.Snapshot) float64 {
			var n int64
			for _, p := range s.Pools {
				n += p.RegisteredBytes
			}
			return i(n)
		})),
	gauge("netio_pool_waiters", "Gets waiting for a pool buffer.", nil,
		one(func(s *stats.Snapshot) float64 {
			n := 0
			for _, p := range s.Pools {
				n += p.Waiters
			}
			return i(n)
		})),
}

var pubsubMetrics = []metric{
	counter("netio_pubsub_published_total", "Messages published (live publishers, all tags).", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumTags(s, func(t stats.PublisherTag) uint64 { return t.Published })
		})),
	counter("netio_pubsub_delivered_total", "Copies taken by subscribers' connections.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumTags(s, func(t stats.PublisherTag) uint64 { return t.Delivered })
		})),
	counter("netio_pubsub_dropped_total", "Copies dropped for Drop subscribers that had no room.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumTags(s, func(t stats.PublisherTag) uint64 { return t.Dropped })
		})),
	counter("netio_pubsub_refused_total", "Publish calls answered NoResources.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumTags(s, func(t stats.PublisherTag) uint64 { return t.Refused })
		})),
	counter("netio_pubsub_failed_total", "Copies not taken because a connection was ending.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumTags(s, func(t stats.PublisherTag) uint64 { return t.Failed })
		})),
	counter("netio_pubsub_room_sleeps_total", "Publisher.WaitRoom calls that slept until woken.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumPubs(s, func(p stats.Publisher) uint64 { return p.RoomSleeps })
		})),
	counter("netio_pubsub_room_wakes_total",
		"WaitRoom wakes: what refused a tag has room for a batch again (send completions), or its subscription ended.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumPubs(s, func(p stats.Publisher) uint64 { return p.RoomWakes })
		})),
	counter("netio_pubsub_room_tick_wakes_total",
		"WaitRoom wakes by the housekeeping tick: a refusal let go with room for less than a batch (a slow or stalled subscriber).", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumPubs(s, func(p stats.Publisher) uint64 { return p.RoomTickWakes })
		})),
	gauge("netio_pubsub_subscribers", "Subscribers the live publishers serve.", nil,
		one(func(s *stats.Snapshot) float64 {
			n := 0
			for _, p := range s.Publishers {
				n += p.Subscribers
			}
			return i(n)
		})),
	counter("netio_pubsub_received_messages_total", "Messages subscribers delivered.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Messages })
		})),
	counter("netio_pubsub_received_bytes_total", "Payload bytes of those.", nil,
		one(func(s *stats.Snapshot) float64 { return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Bytes }) })),
	counter("netio_pubsub_gaps_total", "Gaps subscribers reported.", nil,
		one(func(s *stats.Snapshot) float64 { return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Gaps }) })),
	counter("netio_pubsub_missed_messages_total", "Messages lost in those gaps.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Missed })
		})),
	counter("netio_pubsub_moves_total", "Tags whose count went over to another publisher (a new count, not a gap).", nil,
		one(func(s *stats.Snapshot) float64 { return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Moves }) })),
	counter("netio_pubsub_reconnects_total", "Control connections subscribers made again.", nil,
		one(func(s *stats.Snapshot) float64 {
			return sumSubs(s, func(r stats.Subscriber) uint64 { return r.Reconnects })
		})),
}

func sumTags(s *stats.Snapshot, get func(stats.PublisherTag) uint64) float64 {
	var n uint64
	for _, p := range s.Publishers {
		for _, t := range p.Tags {
			n += get(t)
		}
	}
	return u(n)
}

func sumPubs(s *stats.Snapshot, get func(stats.Publisher) uint64) float64 {
	var n uint64
	for _, p := range s.Publishers {
		n += get(p)
	}
	return u(n)
}

func sumSubs(s *stats.Snapshot, get func(stats.Subscriber) uint64) float64 {
	var n uint64
	for _, r := range s.Subscribers {
		n += get(r)
	}
	return u(n)
}
