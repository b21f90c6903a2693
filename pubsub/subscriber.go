package pubsub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/stats"
)

// Defaults for SubscriberConfig.
const (
	DefaultInitialBackoff  = 10 * time.Millisecond
	DefaultMaxBackoff      = 2 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultResolveInterval = 200 * time.Millisecond
	// DefaultSubscriberSpinBudget is the spin budget of a Subscriber's own
	// poller (cq.Config.SpinBudget) when PollerConfig leaves it 0, in place
	// of cq.DefaultSpinBudget. A subscriber only receives: its spin
	// catches no reply, only the next buffer of a stream, and on a machine
	// where publishers and subscribers share the cores a spinning
	// subscriber takes the CPU its publisher (or the other subscribers)
	// needs. 10 µs is one spin slice of the poller: a subscriber that keeps
	// up with a stream whose buffers come less than cq.StretchLimit × 10 µs
	// apart goes on spinning between them (the poller stretches its budget
	// when work comes back soon after it blocked), one that gets a buffer
	// every 100 µs, as each of four subscribers sharing two cores with
	// their publisher, spins 10 µs and sleeps. A message that comes after
	// a longer gap pays a wake-up, tens of µs. Set PollerConfig.SpinBudget
	// for another trade-off (cq.DefaultSpinBudget for the lowest latency
	// of messages that come 10-800 µs apart).
	DefaultSubscriberSpinBudget = 10 * time.Microsecond
)

// Status bits of a message, as FELIX's clients define them: a front-end
// or the software marks a message truncated, malformed or failing its
// CRC. The subscriber counts each bit per tag (TagStats.StatusBits).
const (
	StatusFirmwareTruncated uint8 = 1 << 0
	StatusSoftwareTruncated uint8 = 1 << 1
	StatusFirmwareMalformed uint8 = 1 << 2
	StatusFirmwareCRC       uint8 = 1 << 3
	StatusSoftwareMalformed uint8 = 1 << 4
)

// Message is one message delivered to a subscriber.
type Message struct {
	Tag    uint64
	Seq    uint64 // the tag's sequence number at its publisher
	Status uint8  // the status the publisher gave (0: none)
	// Data is the payload. It is valid only during the callback: copy what
	// you keep.
	Data []byte
	// Publisher is the subscription address of the publisher it came from.
	Publisher string
}

// Gap reports messages of a tag that a subscriber did not get: dropped for
// it (Drop policy), or lost while its connection was down.
type Gap struct {
	Publisher string
	Tag       uint64
	// First is the sequence number of the first message missed, Count how
	// many were missed (First .. First+Count-1).
	First, Count uint64
	// Reset means the publisher's numbering went back (it restarted
	// without continuing it; see PublisherConfig.FirstSequence): how many
	// were missed is unknown, Count is 0 and First is the new number.
	Reset bool
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Bus finds the publisher of each tag: Fixed(addr) for a publisher
	// whose subscription address is known, or a Directory. Required.
	Bus Bus
	// Address is the local IP the data listener binds to; empty uses the
	// domain's address.
	Address string
	// Receive sets the data connections' receive buffers; defaults apply
	// to zero fields. BufferSize must be at least the publishers' send
	// buffer size (they refuse a smaller one).
	Receive netio.ReceiveParams
	// Policy asks publishers for Block or Drop; DefaultPolicy leaves it to
	// them.
	Policy Policy
	// OnMessage is called for every message of a subscribed tag, in
	// sequence order per tag. It runs on the data poller's goroutine and
	// must not block: a callback that blocks stops every publisher's
	// connection on that poller and, through back-pressure, stalls
	// publishers (Block) or loses messages (Drop). Required unless
	// OnBuffer is set.
	OnMessage func(m Message)
	// OnBuffer, when set, is also called with every whole buffer received,
	// after its messages went to OnMessage: netio3's coalesced format,
	// control records included (messages of ControlTag). buf is valid only
	// during the call. Same goroutine and rule as OnMessage.
	OnBuffer func(publisher string, buf []byte)
	// OnGap is called for every gap, at the first message or SYNC record
	// after it. Same goroutine and rule as OnMessage. May be nil: gaps are
	// counted in any case (TagStats).
	OnGap func(g Gap)
	// OnSubscribed is called when a publisher acknowledged tags that were
	// not subscribed before (Subscribe, SubscribeAsync); from then on
	// every message published on them is delivered or reported as a gap.
	// It runs on the publisher's control goroutine and must not block for
	// long. May be nil.
	OnSubscribed func(publisher string, tags []uint64)
	// OnRefused is called when a publisher refused tags it does not serve
	// (SubscribeAsync; Subscribe returns an error instead). The tags are no
	// longer wanted. Same goroutine as OnSubscribed. May be nil.
	OnRefused func(publisher string, tags []uint64)
	// OnLost is called when the connection to a publisher ended with tags
	// subscribed: err says why. The subscriber reconnects by itself. Same
	// goroutine as OnSubscribed. May be nil.
	OnLost func(publisher string, tags []uint64, err error)
	// OnRestored is called when lost tags are subscribed again (to the
	// same publisher or, through the bus, to another). Gaps are reported
	// by OnGap as the data comes. Same goroutine as OnSubscribed. May be
	// nil.
	OnRestored func(publisher string, tags []uint64)
	// InitialBackoff is the wait before reconnecting after a failure; it
	// doubles on every failure up to MaxBackoff. 0 selects
	// DefaultInitialBackoff and DefaultMaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// DialTimeout bounds a connection to a publisher's subscription port,
	// and RequestTimeout its answer to a request. 0 selects
	// DefaultDialTimeout and DefaultRequestTimeout.
	DialTimeout, RequestTimeout time.Duration
	// ResolveInterval is how often tags without a publisher
	// (SubscribeAsync), and tags of publishers that are down, are looked up
	// on the bus again. 0 selects DefaultResolveInterval.
	ResolveInterval time.Duration
	// Runtime names the data listener's poller (nil: its own, configured by
	// PollerConfig) and the logger. An own poller whose SpinBudget is 0
	// spins DefaultSubscriberSpinBudget and, when it is Adaptive and
	// GOMAXPROCS exceeds the number of such locked pollers of the
	// process's other Subscribers by more than 1, runs on an OS thread of
	// its own (cq.Config.LockOSThread: no runtime.Gosched between empty
	// polls, which costs a subscriber two thread switches per gap in a
	// stream); set SpinBudget (for example to DefaultSubscriberSpinBudget)
	// to keep the thread unlocked.
	cq.Runtime
}

// Subscriber subscribes to tags of publishers found on a bus and receives
// their messages: one control connection and one data connection per
// publisher, whatever the number of tags. Its methods are safe for
// concurrent use; Subscribe, Unsubscribe and Close block and must not be
// called from a callback.
type Subscriber struct {
	entry    *stats.Entry // the subscriber in its manager's stats.Registry
	mgr      *domain.Manager
	cfg      SubscriberConfig
	log      zerolog.Logger
	ln       *endpoint.Listener
	dataAddr string
	recvSize int

	tags    atomic.Pointer[map[uint64]*recvTag] // changed under mu
	tagsVer atomic.Uint64

	mu         sync.Mutex
	sessions   map[string]*subSession
	owner      map[uint64]*subSession // the session carrying each wanted tag
	unresolved map[uint64]bool        // SubscribeAsync tags without a publisher yet
	lost       map[uint64]bool        // tags lost and not yet restored
	closed     bool

	tokMu   sync.Mutex
	tokens  map[uint64]tokenInfo
	gens    atomic.Uint64
	streams map[string]uint64 // numbering names, interned (streamID)

	// Poller goroutine only.
	conns    map[*endpoint.ReceiveEndpoint]*dataConn
	lastEP   *endpoint.ReceiveEndpoint
	lastConn *dataConn
	tagCache [tagCacheSize]tagCacheEntry
	dirty    []*recvTag // tags with counted messages not yet in their counters (flushCounts)

	lockedPoller bool // counted in lockedPollers

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	st subStats
}

// tokenInfo is what a HELLO record's token stands for.
type tokenInfo struct {
	sess   *subSession
	gen    uint64
	stream *atomic.Uint64 // the connection's numbering (streamID), set at its hello ack
}

// dataConn is one data connection, known from its HELLO record.
type dataConn struct {
	sess     *subSession
	gen      uint64
	pub      string
	instance uint64
	stream   *atomic.Uint64 // its control connection's
}

// recvTag is a subscribed tag. The numbering fields belong to the poller
// goroutine; the counters are read by TagStats at any time.
type recvTag struct {
	tag    uint64
	gen    uint64      // the data connection carrying the tag (0: none yet)
	sess   *subSession // that connection's publisher
	stream uint64      // the numbering counted (streamID)
	synced bool        // next is known
	// next is the number of the tag's next message, counted by the poller;
	// expect is its copy for TagStats, and pendMsgs and pendBytes the
	// messages counted since messages and bytes were last brought up to
	// date. The poller publishes them once per buffer (flushCounts), not
	// per message.
	next                uint64
	expect              atomic.Uint64
	pendMsgs, pendBytes uint64
	dirty               bool // listed in Subscriber.dirty
	// ack is the first subscribe ack of the tag in the numbering it
	// follows (ackedAt), for the poller to count from; owner is the
	// session the tag is subscribed at, set under s.mu (substream.go).
	ack   atomic.Pointer[tagAck]
	owner atomic.Pointer[subSession]

	messages, bytes, gaps, missed, resets, outOfSeq, flagged, moves atomic.Uint64
	bits                                                            [8]atomic.Uint64
}

type subStats struct {
	buffers, malformed, badRecords, unsolicited, stray atomic.Uint64
	outOfSeq, gaps, missed, resets, reconnects, moves  atomic.Uint64
	controlErrors, messages, bytes                     atomic.Uint64
}

// NewSubscriber starts a subscriber: it listens for publishers' data
// connections in mgr's domain and subscribes nothing yet.
func NewSubscriber(mgr *domain.Manager, cfg SubscriberConfig) (*Subscriber, error) {
	switch {
	case mgr == nil:
		return nil, fmt.Errorf("%w: pubsub: nil domain manager", netio.ErrInvalidArgument)
	case cfg.Bus == nil:
		return nil, fmt.Errorf("%w: pubsub: SubscriberConfig.Bus is required (Fixed(addr) for one publisher)", netio.ErrInvalidArgument)
	case cfg.OnMessage == nil && cfg.OnBuffer == nil:
		return nil, fmt.Errorf("%w: pubsub: OnMessage or OnBuffer is required", netio.ErrInvalidArgument)
	case cfg.Policy > Drop:
		return nil, fmt.Errorf("%w: pubsub: unknown policy %d", netio.ErrInvalidArgument, cfg.Policy)
	case cfg.InitialBackoff < 0 || cfg.MaxBackoff < 0 || cfg.DialTimeout < 0 || cfg.RequestTimeout < 0 || cfg.ResolveInterval < 0:
		return nil, fmt.Errorf("%w: pubsub: negative duration", netio.ErrInvalidArgument)
	}
	if cfg.InitialBackoff == 0 {
		cfg.InitialBackoff = DefaultInitialBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.InitialBackoff)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ResolveInterval == 0 {
		cfg.ResolveInterval = DefaultResolveInterval
	}
	cfg.Receive = cfg.Receive.WithDefaults()
	if err := cfg.Receive.Validate(); err != nil {
		return nil, fmt.Errorf("pubsub: Receive: %w", err)
	}
	if cfg.Address == "" {
		cfg.Address = mgr.Address()
	}
	s := &Subscriber{mgr: mgr, cfg: cfg, log: mgr.Logger(cfg.Logger), recvSize: cfg.Receive.BufferSize,
		sessions: map[string]*subSession{}, owner: map[uint64]*subSession{}, unresolved: map[uint64]bool{}, lost: map[uint64]bool{},
		tokens: map[uint64]tokenInfo{}, streams: map[string]uint64{}, conns: map[*endpoint.ReceiveEndpoint]*dataConn{}, stop: make(chan struct{})}
	empty := map[uint64]*recvTag{}
	s.tags.Store(&empty)
	rt, locked := subscriberRuntime(cfg.Runtime, runtime.GOMAXPROCS(0)-int(lockedPollers.Load()))
	if locked {
		lockedPollers.Add(1)
		s.lockedPoller = true
	}
	ln, err := endpoint.Listen(mgr, net.JoinHostPort(cfg.Address, "0"), endpoint.ListenConfig{
		Params:             cfg.Receive,
		OnData:             s.onData,
		OnConnectionClosed: s.onConnClosed,
		Runtime:            rt,
	})
	if err != nil {
		s.releasePoller()
		return nil, fmt.Errorf("pubsub: data listener: %w", err)
	}
	s.ln, s.dataAddr = ln, ln.Addr()
	s.wg.Add(1)
	go s.resolver()
	s.entry = mgr.Registry().AddSubscriber(s.fillStats)
	return s, nil
}

// lockedPollers counts the Subscribers of this process whose own poller
// subscriberRuntime locked to its thread, and that are not closed yet.
var lockedPollers atomic.Int32

// subscriberRuntime returns rt set up for a subscriber's own poller (rt
// names no poller) whose PollerConfig leaves SpinBudget 0: it spins
// DefaultSubscriberSpinBudget, and when it is Adaptive and free (the
// process's GOMAXPROCS less the subscriber pollers already locked) is
// above 1, on an OS thread of its own (cq.Config.LockOSThread); locked
// says whether it locked it.
//
// Why the thread: between empty polls an unlocked poller calls
// runtime.Gosched, which wakes a thread for the process's idle P; that
// thread takes the poller goroutine and the poller's own thread goes to
// sleep, two futex calls and two context switches per yield. A subscriber
// of a stream yields in every gap between buffers, and with four
// subscribers and their publisher on two cores those switches were the
// largest part of what a subscriber spends beside its messages. A locked
// poller yields with sched_yield alone. A locked poller hands its P to
// the process's other goroutines only once every 8 ms while it spins
// (internal/poll/schedpass.go), so one P is always
// left to them: with one P free the poller stays unlocked.
func subscriberRuntime(rt cq.Runtime, free int) (_ cq.Runtime, locked bool) {
	c := &rt.PollerConfig
	if rt.Poller == nil && c.SpinBudget == 0 {
		c.SpinBudget = DefaultSubscriberSpinBudget
		if locked = !c.LockOSThread && c.Mode == cq.Adaptive && free > 1; locked {
			c.LockOSThread = true
		}
	}
	return rt, locked
}

// DataAddr returns the address publishers dial for data, "ip:port".
func (s *Subscriber) DataAddr() string { return s.dataAddr }

// Subscribe subscribes to tags and returns once each tag's publisher has
// acknowledged: every message published on them after Subscribe returns is
// delivered to OnMessage or, if lost, reported as a gap. Tags already
// subscribed stay so, at the publisher the bus names now (a tag the bus
// moved to another publisher moves there: TagStats.Moves). A tag whose
// publisher cannot be reached is looked up again every ResolveInterval,
// and when the bus names another publisher by then (the file of a dead
// one went stale) Subscribe waits for that one's acknowledgement
// instead. It fails, and then subscribes none of the tags it added,
// when a tag has no publisher on the bus (ErrNoPublisher), a publisher
// refuses a tag, a concurrent Unsubscribe withdraws one (ErrCanceled), or
// ctx ends first (the publisher may be down: Subscribe keeps trying until
// then). It blocks: do not call it from a callback.
func (s *Subscriber) Subscribe(ctx context.Context, tags ...uint64) error {
	if err := checkTags(tags); err != nil {
		return err
	}
	groups := map[string][]uint64{}
	for _, t := range tags {
		addr, err := s.cfg.Bus.Lookup(t)
		if err != nil {
			return fmt.Errorf("pubsub: subscribe tag %#x: %w", t, err)
		}
		groups[addr] = append(groups[addr], t)
	}
	pending := make(map[uint64]*subSession, len(tags)) // where each tag is awaited
	var added []uint64
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("pubsub: subscribe: %w", netio.ErrClosed)
	}
	for addr, ts := range groups {
		ss := s.sessionLocked(addr)
		added = append(added, s.wantLocked(ss, ts)...)
		for _, t := range ts {
			pending[t] = ss
		}
	}
	s.mu.Unlock()
	if err := s.awaitAcks(ctx, pending); err != nil {
		s.mu.Lock()
		s.unwantAddedLocked(added)
		s.mu.Unlock()
		return fmt.Errorf("pubsub: subscribe: %w", err)
	}
	return nil
}

// unwantAddedLocked withdraws each tag of added from the session that
// carries it now: the resolver may have moved it since it was added, to a
// publisher whose session Subscribe never waited at (another group's
// tag, or one acknowledged before it moved), and a tag left there would
// stay subscribed after Subscribe failed. A tag that a concurrent
// Subscribe moved looks the same through owner, and is withdrawn too.
// s.mu is held.
func (s *Subscriber) unwantAddedLocked(added []uint64) {
	bySess := map[*subSession][]uint64{}
	for _, t := range added {
		if o := s.owner[t]; o != nil {
			bySess[o] = append(bySess[o], t)
		}
	}
	for ss, ts := range bySess {
		s.unwantLocked(ss, ts)
	}
}

// SubscribeAsync subscribes to tags without waiting: tags with no
// publisher on the bus yet are looked up again every ResolveInterval,
// publishers that are down are retried with backoff, and OnSubscribed
// (or OnRefused) tells when each is done. It does not block.
func (s *Subscriber) SubscribeAsync(tags ...uint64) error {
	if err := checkTags(tags); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("pubsub: subscribe: %w", netio.ErrClosed)
	}
	s.ensureTagsLocked(tags)
	for _, t := range tags {
		addr, err := s.cfg.Bus.Lookup(t)
		if err != nil {
			if !errors.Is(err, ErrNoPublisher) {
				s.log.Warn().Err(err).Uint64("tag", t).Msg("pubsub: bus lookup failed; retrying")
			}
			s.unresolved[t] = true
			continue
		}
		s.wantLocked(s.sessionLocked(addr), []uint64{t})
	}
	return nil
}

// Unsubscribe ends the subscriptions to tags: nothing more of them is
// delivered once it is called, and it returns when their publishers have
// acknowledged (or ctx ends, or the publisher is down: its subscription
// ends with the connection). Tags not subscribed are ignored. It blocks:
// do not call it from a callback.
func (s *Subscriber) Unsubscribe(ctx context.Context, tags ...uint64) error {
	touched := map[*subSession][]uint64{}
	var unowned []uint64
	s.mu.Lock()
	for _, t := range tags {
		delete(s.unresolved, t)
		delete(s.lost, t)
		if ss := s.ownerLocked(t); ss != nil {
			touched[ss] = append(touched[ss], t)
		} else {
			unowned = append(unowned, t)
		}
	}
	for ss, ts := range touched {
		s.unwantLocked(ss, ts)
	}
	s.dropTagsLocked(unowned)
	s.mu.Unlock()
	for ss, ts := range touched {
		if err := ss.waitGone(ctx, ts); err != nil {
			return fmt.Errorf("pubsub: unsubscribe: %w", err)
		}
	}
	return nil
}

// Subscribed returns the tags subscribed now (acknowledged by their
// publisher on its current connection), in increasing order.
func (s *Subscriber) Subscribed() []uint64 {
	s.mu.Lock()
	sessions := slices.Collect(maps.Values(s.sessions))
	s.mu.Unlock()
	var out []uint64
	for _, ss := range sessions {
		ss.mu.Lock()
		for t := range ss.acked {
			if ss.want[t] {
				out = append(out, t)
			}
		}
		ss.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// Publishers returns the subscription addresses of the publishers the
// subscriber has a session with, connected or not, in order.
func (s *Subscriber) Publishers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.sessions))
}

// Close ends every subscription and connection and stops the
// subscriber's goroutines and its own poller. It is idempotent; it must not
// be called from a callback.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		sessions := slices.Collect(maps.Values(s.sessions))
		s.mu.Unlock()
		close(s.stop)
		for _, ss := range sessions {
			ss.shutdown()
		}
		s.wg.Wait()
		s.closeErr = s.ln.Close()
		s.releasePoller()
		s.entry.Remove(nil)
	})
	return s.closeErr
}

// releasePoller takes the subscriber's own poller off lockedPollers, if
// subscriberRuntime locked it.
func (s *Subscriber) releasePoller() {
	if s.lockedPoller {
		s.lockedPoller = false
		lockedPollers.Add(-1)
	}
}

// checkTags refuses an empty list and ControlTag.
func checkTags(tags []uint64) error {
	if len(tags) == 0 {
		return fmt.Errorf("%w: pubsub: no tags", netio.ErrInvalidArgument)
	}
	if slices.Contains(tags, ControlTag) {
		return fmt.Errorf("%w: pubsub: tag %#x is reserved (ControlTag)", netio.ErrInvalidArgument, ControlTag)
	}
	return nil
}
