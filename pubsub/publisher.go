package pubsub

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

// Defaults for PublisherConfig.
const (
	// DefaultSyncInterval is how many messages of a tag a subscriber gets
	// between two SYNC records when nothing was dropped.
	DefaultSyncInterval = 1024
	// DefaultMaxSubscribers caps the subscription connections a publisher
	// serves at once.
	DefaultMaxSubscribers = 1024
	// DefaultHelloTimeout is how long a new control connection may take to
	// say hello.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultDialTimeout bounds the publisher's dial of a subscriber's
	// data address.
	DefaultDialTimeout = 5 * time.Second
	// controlWriteTimeout bounds the write of one answer, so that a
	// subscriber that does not read cannot hold a control goroutine.
	controlWriteTimeout = 5 * time.Second
	// DefaultMaxInFlight is the default of PublisherConfig.MaxInFlight.
	DefaultMaxInFlight = 256
	// housekeepingTick is how often the publisher sends SYNC records owed
	// after drops and retries messages a Block subscriber could not take.
	housekeepingTick = 5 * time.Millisecond
)

// Policy decides what happens to a subscriber's copy of a message when
// that subscriber's connection has no room for it.
type Policy uint8

const (
	// DefaultPolicy lets the other side decide: a subscriber asking for it
	// gets the publisher's policy, a publisher configured with it uses
	// Block.
	DefaultPolicy Policy = iota
	// Block makes Publish return NoResources and take nothing, from
	// anyone, until the subscriber has room: nothing is lost, and a slow
	// subscriber slows the publisher.
	Block
	// Drop drops that subscriber's copy, counts it per tag, and tells the
	// subscriber (a SYNC record, which it reports as a gap). Other
	// subscribers are not slowed.
	Drop
)

// String returns "default", "block" or "drop".
func (p Policy) String() string {
	switch p {
	case Block:
		return policyBlock
	case Drop:
		return policyDrop
	case DefaultPolicy:
		return "default"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

func parsePolicy(s string) Policy {
	switch s {
	case policyBlock:
		return Block
	case policyDrop:
		return Drop
	}
	return DefaultPolicy
}

// Mode says how a publisher sends.
type Mode uint8

const (
	// Buffered coalesces each subscriber's messages into its send buffers
	// and posts a buffer when it is full or FlushInterval after its first
	// message (netio3's buffered mode).
	Buffered Mode = iota
	// Immediate posts every message at once, one libfabric message each
	// (still in the coalesced format, so subscribers read both modes).
	Immediate
	// ZeroCopy sends the caller's memory without copying it
	// (PublishZeroCopy): each message is one libfabric message of a small
	// header, copied into a registered header slot, and the caller's data,
	// which must not change until OnPublishCompleted reports its key. The
	// copying Publish variants return InvalidArgument in this mode.
	ZeroCopy
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Tags are the tags served from the start; AddTags adds more. ControlTag
	// is refused.
	Tags []uint64
	// FirstSequence gives the sequence number of a tag's first message;
	// nil starts every tag at 0. A publisher restarted under the same name
	// can continue its numbering, so that subscribers count exactly what
	// they missed across the restart.
	FirstSequence func(tag uint64) uint64
	// Mode is Buffered (the zero value) or Immediate.
	Mode Mode
	// Policy applies to subscribers that ask for none; DefaultPolicy means
	// Block.
	Policy Policy
	// PolicyFor, when set, decides a subscriber's policy from its data
	// address and what it asked for (DefaultPolicy when it asked for none).
	// It runs on the subscriber's control goroutine.
	PolicyFor func(peer string, asked Policy) Policy
	// Send sets each subscriber connection's send buffers (netio3's
	// buffer_size and buffer_count); defaults apply to zero fields. A
	// message must fit in one buffer with its framing. A subscriber whose
	// receive buffers are smaller is refused at hello.
	Send netio.BufferedSendParams
	// FlushInterval is the longest a message waits in a partly filled
	// buffer (netio3's flush timeout). 0 selects
	// endpoint.DefaultCoalesceFlushInterval. In Immediate mode it only
	// bounds the wait when the provider's transmit queue was full.
	FlushInterval time.Duration
	// SyncInterval is the number of messages of a tag a subscriber gets
	// between two SYNC records; 0 selects DefaultSyncInterval. SYNC records
	// are also sent at the start of a subscription and after a drop.
	SyncInterval int
	// OnSubscribe is called when a subscriber subscribes to a tag, before
	// the publisher acknowledges; peer is its data address. It runs on that
	// subscriber's control goroutine and must not block for long. May be
	// nil.
	OnSubscribe func(tag uint64, peer string)
	// OnUnsubscribe is called when a subscription ends: the subscriber
	// unsubscribed, or went away (its control or data connection ended),
	// or the publisher closed. It runs on that subscriber's control
	// goroutine and must not block for long. May be nil.
	OnUnsubscribe func(tag uint64, peer string)
	// MaxSubscribers caps the control connections served at once; more
	// are refused with an error answer. 0 selects DefaultMaxSubscribers.
	MaxSubscribers int
	// HelloTimeout closes a control connection that has not said hello
	// after this long. 0 selects DefaultHelloTimeout.
	HelloTimeout time.Duration
	// DialTimeout bounds the dial of a subscriber's data address. 0
	// selects DefaultDialTimeout.
	DialTimeout time.Duration
	// AllowForeignDataHost lets a subscriber name a data address on
	// another host than the one its control connection comes from. By
	// default that is refused, so that a peer cannot make the publisher
	// dial third parties.
	AllowForeignDataHost bool
	// ZeroCopyRegion (ZeroCopy mode) is the registered memory the caller
	// publishes from, used by every subscriber's connection. Data outside
	// it (or without one) is pinned and registered through a registration
	// cache the publisher shares between its subscribers. The caller closes
	// it after the publisher.
	ZeroCopyRegion *domain.Registration
	// MaxInFlight (ZeroCopy mode) bounds the messages published and not
	// yet completed, and the sends in flight per subscriber. 0 selects
	// DefaultMaxInFlight.
	MaxInFlight int
	// OnPublishCompleted (ZeroCopy mode) is called once for every
	// PublishZeroCopy that returned OK or PartiallyFailed, when every
	// subscriber's send of it has completed: OK when all did, Failed when
	// none did (their connections ended), PartiallyFailed otherwise. From
	// then on the caller may reuse the data. It runs on the poller
	// goroutine (or a control goroutine when a connection ends) and must
	// not block. May be nil.
	OnPublishCompleted func(key uint64, st Status)
	// Bus, when set, is told which tags this publisher serves (Announce),
	// kept current while it runs, and told when it closes (Withdraw).
	Bus Bus
	// BusID names this publisher on the bus. Empty derives one from the
	// host name, the process ID and the subscription address.
	BusID string
	// Runtime names the poller the data connections share (nil: the
	// publisher opens one) and the logger.
	cq.Runtime
}

// Publisher serves tags to subscribers: it takes subscriptions on a TCP
// subscription port and sends every message published on a tag to the
// subscribers of that tag at that moment, over one libfabric connection
// per subscriber, in netio3's coalesced format.
//
// Publish and its variants never block and are safe for concurrent use;
// messages of one tag go out in the order of the Publish calls that
// returned OK (or PartiallyFailed), each with the next sequence number of
// the tag.
type Publisher struct {
	mgr        *domain.Manager
	cfg        PublisherConfig
	log        zerolog.Logger
	ln         net.Listener
	addr       string
	poller     *cq.Poller
	ownPoller  bool
	instance   uint64
	maxPayload int
	syncEvery  int
	busID      string

	// ZeroCopy mode: the publishes in flight, by index, with a free list,
	// and the registration cache the subscribers' connections share.
	zc     []zcEntry
	zcFree chan uint32
	cache  *domain.RegistrationCache

	tagsMu sync.Mutex // serialises changes of tags
	tags   atomic.Pointer[map[uint64]*tagState]

	mu       sync.Mutex
	sessions map[uint64]*pubSession
	nextID   uint64
	closed   bool

	isClosed  atomic.Bool
	ctx       context.Context // canceled by Close: ends dials in progress
	cancel    context.CancelFunc
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	sessionsTotal   atomic.Uint64
	requests        atomic.Uint64
	malformed       atomic.Uint64
	refusedRequests atomic.Uint64
	refusedSessions atomic.Uint64
	refusedTags     atomic.Uint64
	lostPending     atomic.Uint64
}

// tagState is one served tag: its sequence number and subscriptions,
// guarded by mu, which also orders the messages of the tag.
type tagState struct {
	tag uint64
	mu  sync.Mutex
	seq uint64
	// subs are sorted by session ID: Publish locks the sessions of Block
	// subscribers in that order.
	subs []*subscription
	// unsynced counts subscriptions owed a SYNC record (new, or after a
	// drop); read without mu by the housekeeping goroutine to skip the tag.
	unsynced atomic.Int32

	published, noSubs, refused, delivered, dropped, failed uint64
}

// subscription is one subscriber's subscription to one tag, guarded by its
// tag's mu.
type subscription struct {
	sess      *pubSession
	needSync  bool
	sinceSync int
	delivered uint64
	dropped   uint64
}

// NewPublisher starts a publisher whose subscription port listens on addr
// ("IP:PORT" for TCP; port 0 picks one, see Addr) and whose data
// connections go through mgr's domain.
func NewPublisher(mgr *domain.Manager, addr string, cfg PublisherConfig) (*Publisher, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: pubsub: nil domain manager", netio.ErrInvalidArgument)
	}
	cfg.Send = cfg.Send.WithDefaults()
	if err := cfg.Send.Validate(); err != nil {
		return nil, fmt.Errorf("pubsub: Send: %w", err)
	}
	switch {
	case cfg.FlushInterval < 0:
		return nil, fmt.Errorf("%w: pubsub: negative FlushInterval", netio.ErrInvalidArgument)
	case cfg.SyncInterval < 0:
		return nil, fmt.Errorf("%w: pubsub: negative SyncInterval", netio.ErrInvalidArgument)
	case cfg.MaxSubscribers < 0 || cfg.HelloTimeout < 0 || cfg.DialTimeout < 0:
		return nil, fmt.Errorf("%w: pubsub: negative limit", netio.ErrInvalidArgument)
	case cfg.MaxInFlight < 0:
		return nil, fmt.Errorf("%w: pubsub: negative MaxInFlight", netio.ErrInvalidArgument)
	case cfg.Mode > ZeroCopy:
		return nil, fmt.Errorf("%w: pubsub: unknown mode %d", netio.ErrInvalidArgument, cfg.Mode)
	case cfg.Policy > Drop:
		return nil, fmt.Errorf("%w: pubsub: unknown policy %d", netio.ErrInvalidArgument, cfg.Policy)
	}
	if cfg.Policy == DefaultPolicy {
		cfg.Policy = Block
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	if cfg.MaxSubscribers == 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	// A message needs room for itself and, before it, a SYNC record; the
	// message after a record repeats its tag.
	maxPayload := cfg.Send.BufferSize - coalesce.Overhead(1, true) - coalesce.Overhead(0, true) - RecordLen
	if maxPayload < 1 {
		return nil, fmt.Errorf("%w: pubsub: Send.BufferSize %d leaves no room for a message", netio.ErrInvalidArgument, cfg.Send.BufferSize)
	}
	for _, t := range cfg.Tags {
		if t == ControlTag {
			return nil, fmt.Errorf("%w: pubsub: tag %#x is reserved (ControlTag)", netio.ErrInvalidArgument, t)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pubsub: subscription port: %w", err)
	}
	p := &Publisher{mgr: mgr, cfg: cfg, log: cfg.Logger, ln: ln, addr: ln.Addr().String(),
		instance: randomNonZero(), maxPayload: maxPayload, syncEvery: cfg.SyncInterval,
		sessions: map[uint64]*pubSession{}, stop: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if cfg.Mode == ZeroCopy {
		if p.cache, err = mgr.NewRegistrationCache(domain.CacheConfig{}); err != nil {
			ln.Close()
			return nil, fmt.Errorf("pubsub: registration cache: %w", err)
		}
		p.zc = make([]zcEntry, cfg.MaxInFlight)
		p.zcFree = make(chan uint32, cfg.MaxInFlight)
		for i := range cfg.MaxInFlight {
			p.zcFree <- uint32(i)
		}
	}
	empty := map[uint64]*tagState{}
	p.tags.Store(&empty)
	p.addTags(cfg.Tags)
	if p.poller = cfg.Poller; p.poller == nil {
		if p.poller, err = cq.Open(mgr, cfg.PollerConfig); err != nil {
			ln.Close()
			if p.cache != nil {
				p.cache.Close()
			}
			return nil, fmt.Errorf("pubsub: poller: %w", err)
		}
		p.ownPoller = true
	}
	if cfg.Bus != nil {
		p.busID = cfg.BusID
		if p.busID == "" {
			p.busID = defaultBusID(p.addr)
		}
		if err := cfg.Bus.Announce(p.busID, p.addr, p.Tags()); err != nil {
			p.closeResources()
			return nil, fmt.Errorf("pubsub: bus: %w", err)
		}
	}
	p.wg.Add(2)
	go p.acceptLoop()
	go p.housekeeping()
	return p, nil
}

// Addr returns the subscription port's address, "ip:port".
func (p *Publisher) Addr() string { return p.addr }

// Instance returns the number that identifies this publisher to its
// subscribers (different for every Publisher).
func (p *Publisher) Instance() uint64 { return p.instance }

// MaxMessageSize returns the largest payload Publish accepts.
func (p *Publisher) MaxMessageSize() int { return p.maxPayload }

// AddTags adds tags to those served; tags already served are ignored.
// ControlTag is refused with an error matching netio.ErrInvalidArgument,
// and then nothing is added.
func (p *Publisher) AddTags(tags ...uint64) error {
	for _, t := range tags {
		if t == ControlTag {
			return fmt.Errorf("%w: pubsub: tag %#x is reserved (ControlTag)", netio.ErrInvalidArgument, t)
		}
	}
	if p.isClosed.Load() {
		return fmt.Errorf("pubsub: AddTags: %w", netio.ErrClosed)
	}
	if !p.addTags(tags) || p.cfg.Bus == nil {
		return nil
	}
	if err := p.cfg.Bus.Announce(p.busID, p.addr, p.Tags()); err != nil {
		return fmt.Errorf("pubsub: bus: %w", err)
	}
	return nil
}

// addTags adds the tags not yet served and reports whether there were any.
func (p *Publisher) addTags(tags []uint64) bool {
	p.tagsMu.Lock()
	defer p.tagsMu.Unlock()
	old := *p.tags.Load()
	var m map[uint64]*tagState
	for _, t := range tags {
		if _, ok := old[t]; ok {
			continue
		}
		if _, ok := m[t]; ok {
			continue
		}
		if m == nil {
			m = make(map[uint64]*tagState, len(old)+len(tags))
			for k, v := range old {
				m[k] = v
			}
		}
		ts := &tagState{tag: t}
		if p.cfg.FirstSequence != nil {
			ts.seq = p.cfg.FirstSequence(t)
		}
		m[t] = ts
	}
	if m == nil {
		return false
	}
	p.tags.Store(&m)
	return true
}

// Tags returns the tags served, in increasing order.
func (p *Publisher) Tags() []uint64 {
	m := *p.tags.Load()
	out := make([]uint64, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Publish sends data as one message of tag to every subscriber of tag and
// returns OK when every one took it, NoSubscriptions when there is none,
// NoResources when a Block subscriber has no room (nobody took it: retry),
// PartiallyFailed or Failed when some or all copies were dropped (Drop
// policy) or their connections were ending, InvalidArgument for a tag not
// served or a message larger than MaxMessageSize, Closed after Close. data
// may be reused at once. It never blocks and does not allocate.
func (p *Publisher) Publish(tag uint64, data []byte) Status {
	parts := [1][]byte{data}
	return p.publish(tag, 0, parts[:])
}

// PublishV is Publish for a payload given in parts (scatter-gather): the
// message's payload is their concatenation.
func (p *Publisher) PublishV(tag uint64, parts [][]byte) Status {
	return p.publish(tag, 0, parts)
}

// PublishStatus is Publish with an 8-bit status carried with the message
// (netio3's per-message status: 0 means none and costs nothing on the
// wire; the StatusFlag bits are FELIX's), and the payload in parts.
func (p *Publisher) PublishStatus(tag uint64, status uint8, parts ...[]byte) Status {
	return p.publish(tag, status, parts)
}

func (p *Publisher) publish(tag uint64, status uint8, parts [][]byte) Status {
	if p.cfg.Mode == ZeroCopy {
		return InvalidArgument
	}
	ts := (*p.tags.Load())[tag]
	if ts == nil {
		if p.isClosed.Load() {
			return Closed
		}
		return InvalidArgument
	}
	n := 0
	for _, b := range parts {
		n += len(b)
	}
	if n > p.maxPayload {
		return InvalidArgument
	}
	ts.mu.Lock()
	if p.isClosed.Load() {
		ts.mu.Unlock()
		return Closed
	}
	subs := ts.subs
	if st := ts.admit(subs); st != OK {
		return st
	}
	seq := ts.seq
	var ok, bad uint64
	for _, s := range subs {
		if s.deliver(ts, seq, status, parts) {
			s.delivered++
			ok++
		} else {
			bad++
		}
	}
	unlockBlock(subs)
	ts.seq++
	ts.published++
	ts.delivered += ok
	ts.mu.Unlock()
	switch {
	case bad == 0:
		return OK
	case ok == 0:
		return Failed
	}
	return PartiallyFailed
}

// unlockBlock unlocks the sessions of the Block subscriptions in subs.
// admit takes one message of tag ts for its subscribers subs, all or
// nothing, with ts.mu held: a message without subscribers is counted and
// answered NoSubscriptions; otherwise every Block subscriber is locked and
// must be able to take it, or none gets it (NoResources). On any answer
// but OK, ts.mu and every lock taken are released.
func (ts *tagState) admit(subs []*subscription) Status {
	if len(subs) == 0 {
		ts.seq++
		ts.published++
		ts.noSubs++
		ts.mu.Unlock()
		return NoSubscriptions
	}
	for i, s := range subs {
		ss := s.sess
		if ss.policy != Block {
			continue
		}
		ss.mu.Lock()
		if ss.pending.Load() && !ss.drainLocked() {
			unlockBlock(subs[:i+1])
			ts.refused++
			ts.mu.Unlock()
			return NoResources
		}
	}
	return OK
}

func unlockBlock(subs []*subscription) {
	for _, s := range subs {
		if s.sess.policy == Block {
			s.sess.mu.Unlock()
		}
	}
}

// deliver hands the message to s's connection, preceded by a SYNC record
// when one is owed, and reports whether it was taken (a Block subscriber's
// copy that does not fit waits in its pending slot, and counts as taken).
// ts.mu is held, and s.sess.mu when s's policy is Block.
func (s *subscription) deliver(ts *tagState, seq uint64, status uint8, parts [][]byte) bool {
	ss := s.sess
	withSync := s.needSync || s.sinceSync >= ss.p.syncEvery
	if withSync {
		var rec [RecordLen]byte
		putRecord(&rec, RecordSync, ts.tag, seq)
		switch ss.ep.SendMessageStatus(ControlTag, 0, rec[:]) {
		case netio.OK:
			s.synced(ts)
		case netio.NoResources:
			if ss.policy == Block {
				s.synced(ts) // the record goes with the message
				ss.setPendingLocked(true, ts.tag, seq, status, parts)
				return true
			}
			s.drop(ts)
			return false
		default:
			ts.failed++
			return false
		}
	}
	switch ss.ep.SendMessageStatus(ts.tag, status, parts...) {
	case netio.OK:
		s.sinceSync++
		if ss.p.cfg.Mode == Immediate {
			ss.ep.Flush()
		}
		return true
	case netio.NoResources:
		if ss.policy == Block {
			s.sinceSync++
			ss.setPendingLocked(false, ts.tag, seq, status, parts)
			return true
		}
		s.drop(ts)
		return false
	default:
		ts.failed++
		return false
	}
}

// synced records that s's SYNC record was taken. ts.mu is held.
func (s *subscription) synced(ts *tagState) {
	if s.needSync {
		s.needSync = false
		ts.unsynced.Add(-1)
	}
	s.sinceSync = 0
}

// drop counts a dropped copy and owes the subscriber a SYNC record, which
// tells it how many it missed. ts.mu is held.
func (s *subscription) drop(ts *tagState) {
	s.dropped++
	ts.dropped++
	s.sess.dropped.Add(1)
	if !s.needSync {
		s.needSync = true
		ts.unsynced.Add(1)
	}
}

// sendSync sends the SYNC record owed to s, if its connection has room.
// ts.mu is held.
func (s *subscription) sendSync(ts *tagState) {
	ss := s.sess
	if ss.policy == Block {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if ss.pending.Load() && !ss.drainLocked() {
			return
		}
	}
	if ss.zep != nil {
		var hdr [zcHeaderMax]byte
		n := putSyncMessage(hdr[:], ts.tag, ts.seq)
		if ss.zep.Send(hdr[:n], nil, zcNoKey) == netio.OK {
			s.synced(ts)
		}
		return
	}
	var rec [RecordLen]byte
	putRecord(&rec, RecordSync, ts.tag, ts.seq)
	if ss.ep.SendMessageStatus(ControlTag, 0, rec[:]) == netio.OK {
		s.synced(ts)
		if ss.p.cfg.Mode == Immediate {
			ss.ep.Flush()
		}
	}
}

// housekeeping sends the SYNC records owed after drops (so that a drop at
// the end of a burst is reported without waiting for the next message)
// and retries Block subscribers' pending messages (a safety net: their
// send completions retry them first).
func (p *Publisher) housekeeping() {
	defer p.wg.Done()
	t := time.NewTicker(housekeepingTick)
	defer t.Stop()
	var busT <-chan time.Time
	if p.cfg.Bus != nil {
		bt := time.NewTicker(busRefresh(p.cfg.Bus))
		defer bt.Stop()
		busT = bt.C
	}
	var sessions []*pubSession
	for {
		select {
		case <-p.stop:
			return
		case <-busT:
			if err := p.cfg.Bus.Announce(p.busID, p.addr, p.Tags()); err != nil {
				p.log.Warn().Err(err).Msg("pubsub: bus refresh failed")
			}
		case <-t.C:
			sessions = p.sessionList(sessions[:0])
			for _, ss := range sessions {
				if ss.pending.Load() {
					ss.mu.Lock()
					ss.drainLocked()
					ss.mu.Unlock()
				}
			}
			clear(sessions)
			for _, ts := range *p.tags.Load() {
				if ts.unsynced.Load() == 0 {
					continue
				}
				ts.mu.Lock()
				for _, s := range ts.subs {
					if s.needSync {
						s.sendSync(ts)
					}
				}
				ts.mu.Unlock()
			}
		}
	}
}

// sessionList appends the live sessions to buf.
func (p *Publisher) sessionList(buf []*pubSession) []*pubSession {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ss := range p.sessions {
		buf = append(buf, ss)
	}
	return buf
}

// PublisherTagStats counts what a publisher did with one tag.
type PublisherTagStats struct {
	Published       uint64 // Publish calls that used a sequence number (all but NoResources, InvalidArgument, Closed)
	NoSubscriptions uint64 // of those, published while the tag had no subscriber
	Refused         uint64 // Publish calls answered NoResources (a Block subscriber had no room)
	Delivered       uint64 // copies taken by subscribers' connections
	Dropped         uint64 // copies dropped for Drop subscribers that had no room
	Failed          uint64 // copies not taken because a connection was ending
	Subscribers     int    // subscribers now
	NextSeq         uint64 // the sequence number of the tag's next message
}

// TagStats returns the counters of tag, and false when it is not served.
func (p *Publisher) TagStats(tag uint64) (PublisherTagStats, bool) {
	ts := (*p.tags.Load())[tag]
	if ts == nil {
		return PublisherTagStats{}, false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return PublisherTagStats{Published: ts.published, NoSubscriptions: ts.noSubs, Refused: ts.refused,
		Delivered: ts.delivered, Dropped: ts.dropped, Failed: ts.failed, Subscribers: len(ts.subs), NextSeq: ts.seq}, true
}

// PublisherStats counts what a publisher's subscription port did.
type PublisherStats struct {
	Tags            int    // tags served
	Subscribers     int    // control connections served now
	Sessions        uint64 // control connections accepted in all
	Requests        uint64 // control requests parsed and handled
	Malformed       uint64 // control lines refused as malformed (the connection is then closed)
	Refused         uint64 // well-formed requests refused (out of order, bad data address, buffers too small, dial failed)
	RefusedSessions uint64 // connections refused because MaxSubscribers were served
	RefusedTags     uint64 // tags refused in subscribe requests because they are not served
	LostPending     uint64 // messages waiting for a Block subscriber whose connection ended
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	n := len(p.sessions)
	p.mu.Unlock()
	return PublisherStats{Tags: len(*p.tags.Load()), Subscribers: n, Sessions: p.sessionsTotal.Load(),
		Requests: p.requests.Load(), Malformed: p.malformed.Load(), Refused: p.refusedRequests.Load(),
		RefusedSessions: p.refusedSessions.Load(), RefusedTags: p.refusedTags.Load(), LostPending: p.lostPending.Load()}
}

// SubscriberInfo describes one subscriber of a publisher.
type SubscriberInfo struct {
	Peer      string   // its data address
	Policy    Policy   // Block or Drop
	Tags      []uint64 // its tags, in increasing order
	Delivered uint64   // copies its connection took, over its current subscriptions
	Dropped   uint64   // its copies dropped, over all its subscriptions
	Pending   bool     // a message waits for room in its connection (Block)
}

// Subscribers describes the subscribers served now. It allocates; use it
// for diagnostics.
func (p *Publisher) Subscribers() []SubscriberInfo {
	var out []SubscriberInfo
	for _, ss := range p.sessionList(nil) {
		ss.subsMu.Lock()
		tags := make([]uint64, 0, len(ss.subs))
		subs := make([]*subscription, 0, len(ss.subs))
		for t, s := range ss.subs {
			tags = append(tags, t)
			subs = append(subs, s)
		}
		ss.subsMu.Unlock()
		var delivered uint64
		all := *p.tags.Load()
		for i, s := range subs {
			ts := all[tags[i]]
			ts.mu.Lock()
			delivered += s.delivered
			ts.mu.Unlock()
		}
		ss.mu.Lock()
		peer, policy := ss.peer, ss.policy
		ss.mu.Unlock()
		if peer == "" {
			continue // not past hello
		}
		slices.Sort(tags)
		out = append(out, SubscriberInfo{Peer: peer, Policy: policy, Tags: tags, Delivered: delivered,
			Dropped: ss.dropped.Load(), Pending: ss.pending.Load()})
	}
	slices.SortFunc(out, func(a, b SubscriberInfo) int {
		switch {
		case a.Peer < b.Peer:
			return -1
		case a.Peer > b.Peer:
			return 1
		}
		return 0
	})
	return out
}

// Close stops taking subscriptions, ends every subscription (subscribers
// see their connections close and OnUnsubscribe runs for each tag),
// withdraws the publisher from its bus, and stops its goroutines and its own
// poller. Publish then returns Closed. It is idempotent; it must not be
// called from a callback.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.isClosed.Store(true)
		p.mu.Lock()
		p.closed = true
		sessions := make([]*pubSession, 0, len(p.sessions))
		for _, ss := range p.sessions {
			sessions = append(sessions, ss)
		}
		p.mu.Unlock()
		p.cancel()
		err := p.ln.Close()
		close(p.stop)
		for _, ss := range sessions {
			ss.conn.Close()
		}
		p.wg.Wait()
		if p.cfg.Bus != nil {
			err = errors.Join(err, p.cfg.Bus.Withdraw(p.busID))
		}
		p.closeErr = errors.Join(err, p.closeResources())
	})
	return p.closeErr
}

// closeResources closes the publisher's own poller and its registration
// cache.
func (p *Publisher) closeResources() error {
	var err error
	if p.ownPoller {
		err = p.poller.Close()
	}
	if p.cache != nil {
		err = errors.Join(err, p.cache.Close())
	}
	return err
}

// randomNonZero returns a random number other than 0.
func randomNonZero() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}
