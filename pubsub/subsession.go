package pubsub

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/backoff"
)

// ErrRefused is matched by the error of a Subscribe whose tag a publisher
// refused (it does not serve it), and of a request the publisher answered
// with an error.
var ErrRefused = errors.New("pubsub: refused by the publisher")

// subSession is the subscriber's side of one publisher: the tags it
// should carry, the control connection (remade with backoff when it
// breaks), and what the publisher acknowledged on it. One goroutine, run,
// owns the connection.
type subSession struct {
	s    *Subscriber
	addr string

	ctx    context.Context // canceled by shutdown
	cancel context.CancelFunc
	kick   chan struct{} // cap 1: want changed
	done   chan struct{} // closed when run returns

	mu      sync.Mutex
	want    map[uint64]bool // changed under s.mu and mu
	acked   map[uint64]bool // subscribed at the publisher on the current connection since last wanted
	refused map[uint64]bool // refused since last wanted
	// leaving holds the tags subscribed at the publisher on the current
	// connection that were unwanted since: their unsubscribe is owed or
	// not yet acknowledged. A tag wanted again meanwhile is subscribed
	// only after its unsubscribe is acknowledged, so that its new
	// subscription starts afresh at the publisher (and its Subscribe
	// returns only then), never riding on the old one the subscriber
	// has forgotten.
	leaving   map[uint64]bool
	live      bool // the current connection is past hello
	lastErr   error
	downSince time.Time     // when the session last went down (or started)
	changed   chan struct{} // closed and replaced when acked, refused or live change
	conn      net.Conn
	gen       uint64
	stream    uint64 // the current connection's numbering (streamID)
	instance  uint64
	connected bool // a connection got past hello once
}

// sessionLocked returns the session with the publisher at addr, starting
// it if there is none. s.mu is held.
func (s *Subscriber) sessionLocked(addr string) *subSession {
	if ss := s.sessions[addr]; ss != nil {
		return ss
	}
	ss := &subSession{s: s, addr: addr, kick: make(chan struct{}, 1), done: make(chan struct{}),
		want: map[uint64]bool{}, acked: map[uint64]bool{}, refused: map[uint64]bool{}, leaving: map[uint64]bool{},
		changed: make(chan struct{}), downSince: time.Now()}
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	s.sessions[addr] = ss
	s.wg.Add(1)
	go ss.run()
	return ss
}

// wantLocked makes ss carry tags (moving them from another session if
// another carried them) and returns those it did not carry before. s.mu
// is held.
func (s *Subscriber) wantLocked(ss *subSession, tags []uint64) []uint64 {
	var added []uint64
	s.ensureTagsLocked(tags)
	for _, t := range tags {
		delete(s.unresolved, t)
		old := s.owner[t]
		if old == ss {
			continue
		}
		if old != nil {
			old.setWant(t, false)
		}
		s.owner[t] = ss
		s.setOwnerLocked(t, ss)
		ss.setWant(t, true)
		added = append(added, t)
	}
	return added
}

// unwantLocked makes ss stop carrying tags and forgets them. s.mu is held.
func (s *Subscriber) unwantLocked(ss *subSession, tags []uint64) {
	var gone []uint64
	for _, t := range tags {
		if s.owner[t] != ss {
			continue
		}
		delete(s.owner, t)
		s.setOwnerLocked(t, nil)
		ss.setWant(t, false)
		gone = append(gone, t)
	}
	s.dropTagsLocked(gone)
}

// ownerLocked returns the session carrying t, or nil. s.mu is held.
func (s *Subscriber) ownerLocked(t uint64) *subSession { return s.owner[t] }

// ensureTagsLocked creates the receive state of the tags that have none,
// in one copy of the map whatever their number (one copy per tag made
// subscribing N tags cost N² here). s.mu is held.
func (s *Subscriber) ensureTagsLocked(tags []uint64) {
	old := *s.tags.Load()
	var m map[uint64]*recvTag
	for _, t := range tags {
		if old[t] != nil {
			continue
		}
		if m == nil {
			m = maps.Clone(old)
		}
		if m[t] == nil {
			m[t] = &recvTag{tag: t}
		}
	}
	if m != nil {
		s.tags.Store(&m)
		s.tagsVer.Add(1)
	}
}

// dropTagsLocked forgets the receive state of tags, in one copy of the
// map: nothing more of them is delivered. Their counts stay in the
// subscriber's totals. s.mu is held.
func (s *Subscriber) dropTagsLocked(tags []uint64) {
	old := *s.tags.Load()
	var m map[uint64]*recvTag
	for _, t := range tags {
		if old[t] == nil {
			continue
		}
		if m == nil {
			m = maps.Clone(old)
		}
		delete(m, t)
	}
	if m != nil {
		s.tags.Store(&m)
		s.tagsVer.Add(1)
	}
}

// setWant adds or removes t from the tags ss should carry, and wakes its
// goroutine.
func (ss *subSession) setWant(t uint64, on bool) {
	ss.mu.Lock()
	if on {
		ss.want[t] = true
		delete(ss.refused, t)
	} else {
		delete(ss.want, t)
		if ss.acked[t] { // a later want waits for a new ack
			delete(ss.acked, t)
			ss.leaving[t] = true
		}
		ss.signalLocked() // a Subscribe waiting for t returns now
	}
	ss.mu.Unlock()
	ss.poke()
}

// poke wakes the session's goroutine.
func (ss *subSession) poke() {
	select {
	case ss.kick <- struct{}{}:
	default:
	}
}

// signalLocked wakes the waiters. ss.mu is held.
func (ss *subSession) signalLocked() {
	close(ss.changed)
	ss.changed = make(chan struct{})
}

// shutdown stops the session and waits for its goroutine.
func (ss *subSession) shutdown() {
	ss.cancel()
	ss.mu.Lock()
	if ss.conn != nil {
		ss.conn.Close()
	}
	ss.mu.Unlock()
	<-ss.done
}

// breakGen closes the control connection if it is still generation gen:
// its data connection ended, so the session starts over. It does not
// block; the poller calls it.
func (ss *subSession) breakGen(gen uint64) {
	ss.mu.Lock()
	if ss.gen == gen && ss.conn != nil {
		ss.conn.Close()
	}
	ss.mu.Unlock()
}

// run keeps the session connected while it has tags to carry, and ends
// it when it has none.
func (ss *subSession) run() {
	s := ss.s
	defer s.wg.Done()
	defer close(ss.done)
	defer ss.cancel()
	wait := backoff.New(s.cfg.InitialBackoff, s.cfg.MaxBackoff)
	for {
		if ss.finishIfIdle() {
			return
		}
		reached, err := ss.connect()
		ss.lose(err)
		if ss.ctx.Err() != nil {
			return
		}
		if reached {
			wait.Reset()
		}
		t := time.NewTimer(wait.Wait())
		select {
		case <-ss.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-ss.kick: // want changed: maybe idle now, else try at once
			t.Stop()
		}
		wait.Refused()
	}
}

// finishIfIdle removes the session when it has no tag to carry, and
// reports whether it did.
func (ss *subSession) finishIfIdle() bool {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.mu.Lock()
	idle := len(ss.want) == 0
	ss.mu.Unlock()
	if idle && s.sessions[ss.addr] == ss {
		delete(s.sessions, ss.addr)
	}
	return idle
}

// lose records the end of a connection: what was subscribed is lost,
// and reported.
func (ss *subSession) lose(err error) {
	s := ss.s
	ss.mu.Lock()
	var lost []uint64
	for t := range ss.acked {
		if ss.want[t] {
			lost = append(lost, t)
		}
	}
	clear(ss.acked)
	clear(ss.leaving) // the publisher ends them with the connection
	if ss.live {      // down from now on; failed attempts do not move it
		ss.downSince = time.Now()
	}
	ss.live = false
	ss.conn = nil
	if err != nil {
		ss.lastErr = err
	}
	ss.signalLocked()
	ss.mu.Unlock()
	if err != nil && ss.ctx.Err() == nil {
		s.st.controlErrors.Add(1)
		s.log.Info().Err(err).Str("publisher", ss.addr).Int("tags", len(lost)).Msg("pubsub: connection to publisher ended")
	}
	if len(lost) == 0 || ss.ctx.Err() != nil {
		return
	}
	slices.Sort(lost)
	s.mu.Lock()
	for _, t := range lost {
		s.lost[t] = true
	}
	s.mu.Unlock()
	if cb := s.cfg.OnLost; cb != nil {
		if err == nil {
			err = netio.ErrConnectionClosed
		}
		cb(ss.addr, lost, err)
	}
}

// connect makes one control connection and serves it until it ends. It
// reports whether the connection got past hello.
func (ss *subSession) connect() (reached bool, err error) {
	s := ss.s
	dctx, cancel := context.WithTimeout(ss.ctx, s.cfg.DialTimeout)
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", ss.addr)
	cancel()
	if err != nil {
		return false, err
	}
	gen, token, stream := s.gens.Add(1), randomNonZero(), new(atomic.Uint64)
	s.tokMu.Lock()
	s.tokens[token] = tokenInfo{sess: ss, gen: gen, stream: stream}
	s.tokMu.Unlock()
	defer func() {
		s.tokMu.Lock()
		delete(s.tokens, token)
		s.tokMu.Unlock()
	}()
	ss.mu.Lock()
	if ss.ctx.Err() != nil {
		ss.mu.Unlock()
		conn.Close()
		return false, netio.ErrClosed
	}
	ss.conn, ss.gen = conn, gen
	ss.mu.Unlock()
	c := newCtlConn(conn, s.cfg.RequestTimeout)
	defer c.close()

	policy := ""
	if s.cfg.Policy != DefaultPolicy {
		policy = s.cfg.Policy.String()
	}
	resp, err := c.call(ss.ctx, Request{Op: OpHello, Data: s.dataAddr, Token: token, BufferSize: s.recvSize, Policy: policy})
	if err != nil {
		return false, fmt.Errorf("hello: %w", err)
	}
	// Before any subscribe: the poller reads it at a tag's first record.
	id := s.streamID(ss.addr, resp.Numbering)
	stream.Store(id)
	ss.mu.Lock()
	if ss.connected {
		s.st.reconnects.Add(1)
	}
	ss.stream = id
	ss.live, ss.connected, ss.instance, ss.lastErr = true, true, resp.Instance, nil
	ss.signalLocked()
	ss.mu.Unlock()
	for {
		sub, unsub := ss.diff()
		switch {
		case len(sub) > 0:
			resp, err := c.call(ss.ctx, Request{Op: OpSubscribe, Tags: sub})
			if err != nil {
				return true, fmt.Errorf("subscribe: %w", err)
			}
			ss.subscribed(resp)
		case len(unsub) > 0:
			if _, err := c.call(ss.ctx, Request{Op: OpUnsubscribe, Tags: unsub}); err != nil {
				return true, fmt.Errorf("unsubscribe: %w", err)
			}
			ss.unsubscribed(unsub)
		default:
			ss.mu.Lock()
			idle := len(ss.want) == 0
			ss.mu.Unlock()
			if idle {
				return true, nil
			}
			select {
			case <-ss.kick:
			case err := <-c.errc:
				return true, err
			case <-ss.ctx.Done():
				return true, nil
			}
		}
	}
}

// diff returns the tags to subscribe (wanted, not acknowledged, not
// refused, not leaving) and to unsubscribe (leaving), each at most
// MaxTagsPerRequest.
func (ss *subSession) diff() (sub, unsub []uint64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for t := range ss.want {
		if !ss.acked[t] && !ss.refused[t] && !ss.leaving[t] && len(sub) < MaxTagsPerRequest {
			sub = append(sub, t)
		}
	}
	for t := range ss.leaving {
		if len(unsub) < MaxTagsPerRequest {
			unsub = append(unsub, t)
		}
	}
	slices.Sort(sub)
	slices.Sort(unsub)
	return sub, unsub
}

// subscribed records a subscribe ack and reports what it changed.
func (ss *subSession) subscribed(resp Response) {
	s := ss.s
	ss.mu.Lock()
	var fresh, refused []uint64
	tags := *s.tags.Load()
	for i, t := range resp.Tags {
		switch {
		case !ss.want[t]: // unwanted while the request was out
			ss.leaving[t] = true
		case !ss.acked[t]:
			fresh = append(fresh, t)
			if rt := tags[t]; rt != nil && resp.Next != nil {
				rt.ackedAt(ss.gen, resp.Next[i], ss.stream)
			}
			ss.acked[t] = true
		}
	}
	for _, t := range resp.Refused {
		if ss.want[t] && !ss.refused[t] {
			ss.refused[t] = true
			refused = append(refused, t)
		}
	}
	ss.signalLocked()
	ss.mu.Unlock()
	if len(refused) > 0 {
		s.mu.Lock()
		refused = ss.stillRefused(refused)
		s.unwantLocked(ss, refused)
		s.mu.Unlock()
	}
	if cb := s.cfg.OnRefused; cb != nil && len(refused) > 0 {
		cb(ss.addr, refused)
	}
	if len(fresh) == 0 {
		return
	}
	var restored, subscribed []uint64
	s.mu.Lock()
	for _, t := range fresh {
		if s.lost[t] {
			delete(s.lost, t)
			restored = append(restored, t)
		} else {
			subscribed = append(subscribed, t)
		}
	}
	s.mu.Unlock()
	if cb := s.cfg.OnRestored; cb != nil && len(restored) > 0 {
		cb(ss.addr, restored)
	}
	if cb := s.cfg.OnSubscribed; cb != nil && len(subscribed) > 0 {
		cb(ss.addr, subscribed)
	}
}

// unsubscribed records the ack of an unsubscribe request of tags: none
// of them is subscribed at the publisher any more (one it did not hold
// was not), and those wanted again may be subscribed now.
func (ss *subSession) unsubscribed(tags []uint64) {
	ss.mu.Lock()
	for _, t := range tags {
		delete(ss.leaving, t)
	}
	ss.signalLocked()
	ss.mu.Unlock()
}

// stillRefused returns the tags of refused that are refused still: a tag
// wanted again since (a Subscribe after the publisher began to serve it)
// is not refused any more, and its refusal must not withdraw it.
func (ss *subSession) stillRefused(refused []uint64) []uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.DeleteFunc(refused, func(t uint64) bool { return !ss.refused[t] })
}

// resolver looks up, every ResolveInterval, the tags that have no
// publisher yet and the tags of publishers that have been down that long,
// and moves them where the bus says they are now.
func (s *Subscriber) resolver() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.ResolveInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		for tag := range s.unresolved {
			if addr, err := s.cfg.Bus.Lookup(tag); err == nil {
				s.wantLocked(s.sessionLocked(addr), []uint64{tag})
			}
		}
		for addr, ss := range s.sessions {
			ss.mu.Lock()
			down := !ss.live && time.Since(ss.downSince) >= s.cfg.ResolveInterval
			var tags []uint64
			if down {
				tags = slices.Collect(maps.Keys(ss.want))
			}
			ss.mu.Unlock()
			for _, tag := range tags {
				if a, err := s.cfg.Bus.Lookup(tag); err == nil && a != addr {
					s.wantLocked(s.sessionLocked(a), []uint64{tag})
				}
			}
		}
		s.mu.Unlock()
	}
}
