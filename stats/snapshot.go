// Package stats is the one view of everything opened on a domain.Manager:
// a plain, JSON-marshalable Snapshot of its registrations, registration
// caches, pools, pollers, listeners, every live endpoint of every kind and
// the publish/subscribe parts, with the counters of endpoints that closed
// folded into per-kind totals so that two snapshots can be diffed.
//
// Every part registers a fill function in its manager's Registry when it
// opens and leaves it when it closes. A fill function reads atomics the
// data path already owns; a snapshot never takes a lock the data path
// takes, so taking one costs the data path nothing. Take one with
// domain.Manager.Snapshot; package stats/promstats exports it to
// Prometheus.
//
// The package imports only the standard library and the root netio
// package, so that every part of the library can fill its records.
package stats

import "time"

// Snapshot is everything opened on one manager at one instant. Counters
// (the fields documented as counts) only grow over the manager's life;
// gauges (now, free, pending) go up and down. Sections are ordered by the
// ID the registry gave each part when it opened.
type Snapshot struct {
	Provider      string        `json:"provider"`
	Address       string        `json:"address"`
	Taken         time.Time     `json:"taken"`
	Registrations Registrations `json:"registrations"`
	Caches        []Cache       `json:"caches"`
	Pools         []Pool        `json:"pools"`
	// Pollers are the live pollers; PollerTotals sums live and closed
	// ones by name.
	Pollers      []Poller `json:"pollers"`
	PollerTotals []Poller `json:"poller_totals"`
	// Listeners are the live listeners; ListenerTotals sums live and
	// closed ones.
	Listeners      []Listener `json:"listeners"`
	ListenerTotals Listener   `json:"listener_totals"`
	// Endpoints are the live endpoints; Kinds sums live and closed ones by
	// kind, so nothing an endpoint counted is lost when it closes.
	Endpoints   []Endpoint   `json:"endpoints"`
	Kinds       []Kind       `json:"kinds"`
	Publishers  []Publisher  `json:"publishers"`
	Subscribers []Subscriber `json:"subscribers"`
}

// Registrations is the manager's registration accounting.
type Registrations struct {
	Count     int   `json:"count"`      // live registrations
	Bytes     int64 `json:"bytes"`      // bytes of them
	PeakCount int   `json:"peak_count"` // high-water mark of Count
	PeakBytes int64 `json:"peak_bytes"` // high-water mark of Bytes
	MaxCount  int   `json:"max_count"`  // limit in force (0: none)
	MaxBytes  int64 `json:"max_bytes"`  // limit in force (0: none)
	Refused   int64 `json:"refused"`    // count: registrations refused for a limit
}

// Cache is a registration cache (domain.RegistrationCache).
type Cache struct {
	ID        uint64 `json:"id"`
	Hits      uint64 `json:"hits"`      // count
	Misses    uint64 `json:"misses"`    // count
	Merges    uint64 `json:"merges"`    // count
	Evictions uint64 `json:"evictions"` // count
	InUse     int    `json:"in_use"`
	Stale     int    `json:"stale"`
}

// Pool is a registered buffer pool (pool.Pool).
type Pool struct {
	ID              uint64 `json:"id"`
	RegisteredBytes int64  `json:"registered_bytes"`
	PeakBytes       int64  `json:"peak_bytes"`
	Budget          int64  `json:"budget"` // 0: none
	Waiters         int    `json:"waiters"`
	Tiers           []Tier `json:"tiers"` // smallest first
}

// Tier is one tier of a pool.
type Tier struct {
	Size  int `json:"size"`  // buffer size in bytes
	Count int `json:"count"` // registered buffers
	Free  int `json:"free"`
	// MinFree is the fewest free buffers since the previous snapshot
	// (independent of pool.Pool.Stats' interval).
	MinFree int `json:"min_free"`
}

// Poller is a completion poller (cq.Poller), or the sum of the pollers of
// one name.
type Poller struct {
	ID          uint64    `json:"id,omitempty"` // 0 in PollerTotals
	Name        string    `json:"name"`         // cq.Config.Name, "default" when unset
	Live        int       `json:"live"`         // pollers summed (PollerTotals only)
	Completions uint64    `json:"completions"`  // count: successful completions delivered
	Errors      uint64    `json:"errors"`       // count: error completions delivered
	Events      uint64    `json:"events"`       // count: connection events delivered
	Dropped     uint64    `json:"dropped"`      // count: completions or events whose owner was gone
	Unreported  uint64    `json:"unreported"`   // count: error completions of counted injects (cq.Stats.Unreported)
	Spins       uint64    `json:"spins"`        // count: rounds that found nothing to do
	Blocks      uint64    `json:"blocks"`       // count: waits on the queues' descriptors
	WakeUps     uint64    `json:"wake_ups"`     // count: waits ended by a ready descriptor
	Timeouts    uint64    `json:"timeouts"`     // count: waits ended by MaxBlock
	Callbacks   Histogram `json:"callbacks"`    // time in the callbacks of one batch of completions, one batch in 16 timed
}

// Histogram is a distribution of durations in fixed buckets.
type Histogram struct {
	// Bounds are the buckets' upper bounds in seconds; Counts has one more
	// entry, for durations above the last bound. Counts are per bucket,
	// not cumulative.
	Bounds     []float64 `json:"bounds_seconds"`
	Counts     []uint64  `json:"counts"`
	Count      uint64    `json:"count"`
	SumSeconds float64   `json:"sum_seconds"`
}

// add sums o into h; both must have the same bounds (or h none yet).
func (h *Histogram) add(o Histogram) {
	if h.Bounds == nil {
		h.Bounds = o.Bounds
		h.Counts = make([]uint64, len(o.Counts))
	}
	for i := range min(len(h.Counts), len(o.Counts)) {
		h.Counts[i] += o.Counts[i]
	}
	h.Count += o.Count
	h.SumSeconds += o.SumSeconds
}

// Listener is a listener of connected endpoints (endpoint.Listener), or
// the sum of all of them.
type Listener struct {
	ID       uint64 `json:"id,omitempty"` // 0 in ListenerTotals
	Addr     string `json:"addr,omitempty"`
	Accepted uint64 `json:"accepted"` // count: connection requests accepted
	Refused  uint64 `json:"refused"`  // count: connection requests rejected
	Active   int    `json:"active"`   // connections served now
}

// Endpoint is one live endpoint. Kind names what it is ("buffered",
// "zerocopy", "rma", "receive", "reconnecting", "rdm"; see the Kind
// constants).
type Endpoint struct {
	ID     uint64 `json:"id"`
	Kind   string `json:"kind"`
	Peer   string `json:"peer,omitempty"`   // remote or local address, for people, never a metric label
	Poller string `json:"poller,omitempty"` // the name of its poller
	Counters
	Gauges
}

// Counters are what an endpoint counted; every field only grows. A kind
// fills the ones it has and leaves the others 0.
type Counters struct {
	MessagesSent      uint64 `json:"messages_sent"`      // posted (or queued for the poller to post)
	BytesSent         uint64 `json:"bytes_sent"`         // bytes of them
	SendsCompleted    uint64 `json:"sends_completed"`    // sends completed OK
	SendsFailed       uint64 `json:"sends_failed"`       // sends completed Failed
	SendsCanceled     uint64 `json:"sends_canceled"`     // sends reported Canceled (pending at close)
	MessagesReceived  uint64 `json:"messages_received"`  // messages received
	BytesReceived     uint64 `json:"bytes_received"`     // bytes of them
	ReceiveErrors     uint64 `json:"receive_errors"`     // receives completed with an error
	CoalescedMessages uint64 `json:"coalesced_messages"` // messages packed into coalesced buffers
	CoalescedBuffers  uint64 `json:"coalesced_buffers"`  // coalesced buffers posted
	CoalesceDropped   uint64 `json:"coalesce_dropped"`   // messages taken for coalescing, never posted
	DecodedMessages   uint64 `json:"decoded_messages"`   // messages decoded from received coalesced buffers
	MalformedBuffers  uint64 `json:"malformed_buffers"`  // received buffers that broke the coalesced format
	Connections       uint64 `json:"connections"`        // connections established (reconnecting)
	Reconnects        uint64 `json:"reconnects"`         // connections established after the first (reconnecting)
	DialErrors        uint64 `json:"dial_errors"`        // dials that failed (reconnecting)
	// InjectsUnconfirmed: injects the provider took that nothing had
	// confirmed sent when their endpoint closed or peer was removed (rdm),
	// or that a connected sender with Inject still held when it ended.
	InjectsUnconfirmed uint64 `json:"injects_unconfirmed"`
}

// Add sums o into c.
func (c *Counters) Add(o Counters) {
	c.MessagesSent += o.MessagesSent
	c.BytesSent += o.BytesSent
	c.SendsCompleted += o.SendsCompleted
	c.SendsFailed += o.SendsFailed
	c.SendsCanceled += o.SendsCanceled
	c.MessagesReceived += o.MessagesReceived
	c.BytesReceived += o.BytesReceived
	c.ReceiveErrors += o.ReceiveErrors
	c.CoalescedMessages += o.CoalescedMessages
	c.CoalescedBuffers += o.CoalescedBuffers
	c.CoalesceDropped += o.CoalesceDropped
	c.DecodedMessages += o.DecodedMessages
	c.MalformedBuffers += o.MalformedBuffers
	c.Connections += o.Connections
	c.Reconnects += o.Reconnects
	c.DialErrors += o.DialErrors
	c.InjectsUnconfirmed += o.InjectsUnconfirmed
}

// Gauges are an endpoint's state now.
type Gauges struct {
	PendingSends int `json:"pending_sends"` // sends posted and not yet completed
	Buffers      int `json:"buffers"`       // buffers it sends or receives from
	FreeBuffers  int `json:"free_buffers"`  // of them, free now
	// MinFreeBuffers is the fewest free since the previous snapshot
	// (independent of the endpoints' NumAvailableBuffers interval).
	MinFreeBuffers int `json:"min_free_buffers"`
	Backlog        int `json:"backlog"` // messages waiting for a connection (reconnecting)
	Peers          int `json:"peers"`   // known peers (rdm)
	// InjectConfirmsHeld: tracked injects in flight, each holding a
	// confirm slot until its completion or Close (rdm).
	InjectConfirmsHeld int `json:"inject_confirms_held"`
}

// Kind sums the endpoints of one kind, live and closed.
type Kind struct {
	Kind   string `json:"kind"`
	Live   int    `json:"live"`   // endpoints open now
	Opened uint64 `json:"opened"` // count: endpoints registered
	// Closed counts the endpoints that closed by reason (see
	// CloseReason): "local", "peer", "timeout", "error".
	Closed   map[string]uint64 `json:"closed"`
	Counters                   // live and closed endpoints together
}

// Publisher is a pubsub.Publisher: its subscription port and its tags.
type Publisher struct {
	ID              uint64         `json:"id"`
	Addr            string         `json:"addr"`
	Subscribers     int            `json:"subscribers"`      // control connections served now
	Sessions        uint64         `json:"sessions"`         // count: control connections accepted
	Requests        uint64         `json:"requests"`         // count
	Malformed       uint64         `json:"malformed"`        // count: control lines refused as malformed
	Refused         uint64         `json:"refused"`          // count: well-formed requests refused
	RefusedSessions uint64         `json:"refused_sessions"` // count: refused for MaxSubscribers
	RoomSleeps      uint64         `json:"room_sleeps"`      // count: WaitRoom calls that slept until woken
	RoomWakes       uint64         `json:"room_wakes"`       // count: WaitRoom wakes, what refused having room for a batch again (or its subscription ending)
	RoomTickWakes   uint64         `json:"room_tick_wakes"`  // count: WaitRoom wakes by the housekeeping tick, a refusal let go with room for less than a batch
	Tags            []PublisherTag `json:"tags"`             // by tag
}

// PublisherTag is what a publisher did with one tag.
type PublisherTag struct {
	Tag       uint64 `json:"tag"`
	Published uint64 `json:"published"` // count
	Refused   uint64 `json:"refused"`   // count: Publish answered NoResources
	Delivered uint64 `json:"delivered"` // count: copies taken by subscribers' connections
	Dropped   uint64 `json:"dropped"`   // count: copies dropped for Drop subscribers
	Failed    uint64 `json:"failed"`    // count: copies not taken, the connection ending
}

// Subscriber is a pubsub.Subscriber and its tags.
type Subscriber struct {
	ID          uint64          `json:"id"`
	Buffers     uint64          `json:"buffers"`     // count: coalesced buffers received
	Messages    uint64          `json:"messages"`    // count: messages delivered
	Bytes       uint64          `json:"bytes"`       // count: their payload bytes
	Malformed   uint64          `json:"malformed"`   // count
	Unsolicited uint64          `json:"unsolicited"` // count
	Gaps        uint64          `json:"gaps"`        // count
	Missed      uint64          `json:"missed"`      // count: messages lost in those gaps
	Moves       uint64          `json:"moves"`       // count: tags whose count went over to another publisher
	Reconnects  uint64          `json:"reconnects"`  // count: control reconnections
	Tags        []SubscriberTag `json:"tags"`        // by tag
}

// SubscriberTag is what a subscriber received of one tag.
type SubscriberTag struct {
	Tag      uint64 `json:"tag"`
	Messages uint64 `json:"messages"` // count
	Bytes    uint64 `json:"bytes"`    // count
	Gaps     uint64 `json:"gaps"`     // count
	Missed   uint64 `json:"missed"`   // count
	Moves    uint64 `json:"moves"`    // count: times its count went over to another publisher
}
