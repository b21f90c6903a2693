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
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/stats"
)

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
	entry      *stats.Entry // the publisher in its manager's stats.Registry
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

	// Shared mode: the buffers shared by the subscribers of each set of
	// tags (shared.go).
	sh *sharedPool

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

	room roomWait // WaitRoom's callers (room.go)
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

	// Shared mode: the tag's group (nil without subscribers), and the
	// buffer (by its number) and run that hold its last message.
	group *group
	shGen uint64
	shRun int

	// poolGen is the pool refusal (refusal.gen) that last refused a
	// message of the tag: WaitRoom for the tag waits on the pool only
	// while that refusal stands.
	poolGen atomic.Uint64

	// Counters: written under mu, atomics so that snapshots (package
	// stats) read them without it.
	published, noSubs, refused, delivered, dropped, failed atomic.Uint64
}

// subscription is one subscriber's subscription to one tag, guarded by its
// tag's mu.
type subscription struct {
	sess      *pubSession
	needSync  bool
	sinceSync int
	delivered uint64
	dropped   uint64
	// fresh means no SYNC record of the subscription reached its
	// connection yet, and start is the tag's number when it began: if
	// copies were dropped before the first SYNC record, a SYNC of start
	// goes first, so the subscriber counts them as a gap instead of
	// starting at the later number (sendStart).
	fresh bool
	start uint64
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
	case cfg.Mode > Shared:
		return nil, fmt.Errorf("%w: pubsub: unknown mode %d", netio.ErrInvalidArgument, cfg.Mode)
	case cfg.Policy > Drop:
		return nil, fmt.Errorf("%w: pubsub: unknown policy %d", netio.ErrInvalidArgument, cfg.Policy)
	case len(cfg.Numbering) > MaxNumberingLen:
		return nil, fmt.Errorf("%w: pubsub: Numbering of %d bytes (at most %d)", netio.ErrInvalidArgument, len(cfg.Numbering), MaxNumberingLen)
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
	if cfg.Mode == Shared { // each send's header (START records) goes first
		maxPayload -= sharedHeaderMax
	}
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
	p := &Publisher{mgr: mgr, cfg: cfg, log: mgr.Logger(cfg.Logger), ln: ln, addr: ln.Addr().String(),
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
	if cfg.Mode == Shared {
		if cfg.MaxInFlight < 2*cfg.Send.BufferCount {
			ln.Close()
			return nil, fmt.Errorf("%w: pubsub: Shared mode needs MaxInFlight (%d) of at least twice Send.BufferCount (%d)", netio.ErrInvalidArgument, cfg.MaxInFlight, cfg.Send.BufferCount)
		}
		if p.sh, err = newSharedPool(mgr, cfg.Send.BufferSize, cfg.MaxInFlight, cfg.Send.BufferCount); err != nil {
			ln.Close()
			return nil, err
		}
		p.sh.pub = p
	}
	empty := map[uint64]*tagState{}
	p.tags.Store(&empty)
	p.addTags(cfg.Tags)
	if p.poller = cfg.Poller; p.poller == nil {
		if p.poller, err = cq.Open(mgr, cfg.PollerConfig); err != nil {
			ln.Close()
			p.closeResources()
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
	p.entry = mgr.Registry().AddPublisher(p.addr, p.fillStats)
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

// housekeeping sends the SYNC records owed after drops (so that a drop at
// the end of a burst is reported without waiting for the next message),
// retries Block subscribers' pending messages (a safety net: their send
// completions retry them first) and, in Shared mode, posts the buffers
// that waited FlushInterval.
func (p *Publisher) housekeeping() {
	defer p.wg.Done()
	t := time.NewTicker(housekeepingTick)
	defer t.Stop()
	// Shared mode posts partly filled buffers on a faster tick, running
	// only while some buffer is being filled: an idle publisher sleeps.
	flushT := time.NewTicker(time.Hour)
	flushT.Stop()
	defer flushT.Stop()
	var filling <-chan struct{}
	flushArmed := false
	if p.sh != nil {
		filling = p.sh.filling
	}
	var busT <-chan time.Time
	if p.cfg.Bus != nil {
		bt := time.NewTicker(busRefresh(p.cfg.Bus))
		defer bt.Stop()
		busT = bt.C
	}
	var sessions []*pubSession
	var groups []*group
	for {
		select {
		case <-p.stop:
			return
		case <-busT:
			if err := p.cfg.Bus.Announce(p.busID, p.addr, p.Tags()); err != nil {
				p.log.Warn().Err(err).Msg("pubsub: bus refresh failed")
			}
		case <-filling:
			if !flushArmed { // never pushed back while armed: that would delay posts
				flushT.Reset(p.sharedFlushTick())
				flushArmed = true
			}
		case <-flushT.C:
			// Counted before it looks: whoever sees a buffer this round
			// posts sees the round counted too.
			p.sh.flushRounds.Add(1)
			var busy bool
			if groups, busy = p.sh.flushDue(p.flushInterval(), groups); !busy {
				flushT.Stop()
				flushArmed = false
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
			p.roomTick(sessions)
			clear(sessions)
			if p.sh != nil {
				continue // shared buffers carry their own SYNC records
			}
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

// Flush sends now what waits in partly filled buffers instead of when
// FlushInterval ends: each subscriber's coalescing buffer, or in Shared
// mode the shared buffers. It never blocks; what a connection has no room
// for goes out as usual. Before it returns, the counters of SubscriberInfo
// and TagStats include every message taken before it was called, except
// those waiting for a Block subscriber (SubscriberInfo.Pending): they
// count when sent, or as failed when its connection ends first.
func (p *Publisher) Flush() {
	if p.sh != nil {
		p.sh.flushDue(0, nil)
		return
	}
	for _, ss := range p.sessionList(nil) {
		ss.mu.Lock()
		ep := ss.ep
		ss.mu.Unlock()
		if ep != nil {
			ep.Flush()
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
		p.entry.Remove(nil)
	})
	return p.closeErr
}

// closeResources closes the publisher's own poller and its registration
// cache.
func (p *Publisher) closeResources() error {
	var err error
	if p.ownPoller && p.poller != nil {
		err = p.poller.Close()
	}
	if p.cache != nil {
		err = errors.Join(err, p.cache.Close())
	}
	if p.sh != nil {
		err = errors.Join(err, p.sh.region.Close())
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

// sharedFlushTick is how often Shared mode looks for buffers to post while
// one is being filled: often enough to post a buffer close to
// FlushInterval after its first message.
func (p *Publisher) sharedFlushTick() time.Duration {
	return max(min(p.flushInterval()/2, housekeepingTick), 100*time.Microsecond)
}

// flushInterval returns FlushInterval or its default.
func (p *Publisher) flushInterval() time.Duration {
	if p.cfg.FlushInterval == 0 {
		return endpoint.DefaultCoalesceFlushInterval
	}
	return p.cfg.FlushInterval
}
