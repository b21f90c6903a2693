package pubsub

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/domain"
)

// Shared mode: a message is encoded once, into the coalesced buffer of its
// tag's group (the tags whose subscribers are the same set of sessions),
// and that one buffer, in registered memory, is posted without copying to
// every session of the group (a zero-copy send each); it goes back to the
// pool when the last of those sends completed.
//
// Every buffer is self-synchronising: a tag's first message in a buffer is
// preceded by a SYNC record of its number, so a subscriber that missed
// whole buffers (Drop) counts exactly what it missed from the next buffer
// it gets. A subscription's START record is owed to its session alone and
// goes in the header of that session's next post.
//
// Locks: ts.mu, then group.mu, then pubSession.mu; pubSession.startMu is a
// leaf.

const (
	// sharedKeyBit marks the key of a shared buffer's send (the rest is
	// the buffer's index).
	sharedKeyBit = 1 << 62
	// sharedStartsPerHeader is how many START records one post's header
	// carries; more go first in sends of their own.
	sharedStartsPerHeader = 8
	// sharedHeaderMax is a Shared-mode header slot.
	sharedHeaderMax = sharedStartsPerHeader * syncMessageLen
)

// sharedPool is a Shared-mode publisher's buffers, in one registered
// region, and its groups.
type sharedPool struct {
	region *domain.Registration
	size   int
	bufs   []sharedBuf
	free   chan uint32
	gen    atomic.Uint64 // numbers buffers as they are started

	pub *Publisher // whose WaitRoom callers a buffer given back may wake

	posted, sends atomic.Uint64 // buffers posted, and their sends taken
	reserve       int           // see dropReserve
	filling       chan struct{} // told (without blocking) when a buffer is started
	flushRounds   atomic.Uint64 // housekeeping rounds that looked for buffers to post

	groupsMu sync.Mutex
	groups   map[string]*group
}

// sharedBuf is one buffer: filled under its group's mu, then read-only
// while posted; refs counts the sends that hold it (and the post itself).
type sharedBuf struct {
	data []byte
	n    int
	refs atomic.Int32
	runs []tagRun // the tags in it and their message counts
}

// tagRun counts the messages of one tag in a buffer.
type tagRun struct {
	ts    *tagState
	count uint64
}

// group is the sessions subscribed to a set of tags, and the buffer the
// messages of those tags are coalesced into.
type group struct {
	key      string
	sessions []*pubSession // sorted by ID; fixed
	hasBlock bool
	users    int // tags whose group this is; under sharedPool.groupsMu

	mu      sync.Mutex
	cur     int32 // the buffer being filled, -1 for none
	curGen  uint64
	enc     coalesce.Encoder
	firstAt time.Time
}

// startRec is a START record owed to a session: post is the session's
// post count when the subscription began (a post queued before it must
// not carry it).
type startRec struct {
	tag, seq uint64
	post     uint64
}

// dropReserve is how a Drop subscriber that stops reading is kept from
// taking the pool from everyone: its sends never complete, so each would
// hold up to Send.BufferCount buffers, and two such subscribers empty a
// pool of 2*BufferCount. So a Drop session that already has a buffer in
// flight is sent another only while at least reserve (Send.BufferCount)
// buffers are free; otherwise its copy is dropped at once (counted, and
// reported by the SYNC records of the next buffer it gets). Stalled Drop
// subscribers together hold at most MaxInFlight-reserve buffers, plus one
// each that stalled with none in flight; a session with nothing in flight
// is always sent its copy. The trade-off: while the pool is that low, a
// healthy Drop subscriber also gets a copy only when its previous send
// completed, so MaxInFlight well above 2*BufferCount keeps it at full
// rate. Block sessions are not held to the reserve: a stalled one holds
// up to BufferCount buffers in flight and one queued post, and when such
// subscribers empty the pool, Publish on any tag answers NoResources,
// taking nothing, until buffers come back (the caller retries).

// newSharedPool allocates count buffers of size bytes in one registered
// region; reserve is the free buffers kept from Drop sessions that hold
// one in flight already.
func newSharedPool(mgr *domain.Manager, size, count, reserve int) (*sharedPool, error) {
	reg, err := mgr.AllocRegistered(size*count, domain.AccessSend)
	if err != nil {
		return nil, fmt.Errorf("pubsub: shared buffers: %w", err)
	}
	sh := &sharedPool{region: reg, size: size, reserve: reserve, filling: make(chan struct{}, 1), bufs: make([]sharedBuf, count),
		free: make(chan uint32, count), groups: map[string]*group{}}
	mem := reg.Bytes()
	for i := range sh.bufs { // a send's header goes in front: not in the buffer
		sh.bufs[i].data = mem[i*size : (i+1)*size-sharedHeaderMax : (i+1)*size-sharedHeaderMax]
		sh.free <- uint32(i)
	}
	return sh, nil
}

// release drops one hold on buffer idx; the last puts it back.
func (sh *sharedPool) release(idx uint32) {
	b := &sh.bufs[idx]
	if b.refs.Add(-1) == 0 {
		clear(b.runs)
		b.runs = b.runs[:0]
		sh.free <- idx
		sh.pub.poolFreed()
	}
}

// groupFor returns the group of the sessions of subs (nil for none) and
// counts one more user of it.
func (sh *sharedPool) groupFor(subs []*subscription) *group {
	if len(subs) == 0 {
		return nil
	}
	key := make([]byte, 8*len(subs))
	for i, s := range subs {
		binary.LittleEndian.PutUint64(key[8*i:], s.sess.id)
	}
	sh.groupsMu.Lock()
	defer sh.groupsMu.Unlock()
	g := sh.groups[string(key)]
	if g == nil {
		g = &group{key: string(key), cur: -1}
		for _, s := range subs {
			g.sessions = append(g.sessions, s.sess)
			g.hasBlock = g.hasBlock || s.sess.policy == Block
		}
		sh.groups[g.key] = g
	}
	g.users++
	return g
}

// unuse counts one user less of g, forgetting it at none.
func (sh *sharedPool) unuse(g *group) {
	sh.groupsMu.Lock()
	defer sh.groupsMu.Unlock()
	if g.users--; g.users == 0 {
		delete(sh.groups, g.key)
	}
}

// regroup moves ts to the group of its subscribers after they changed,
// posting what the old group holds first, so that the tag's messages go
// out in order. ts.mu is held.
func (p *Publisher) regroup(ts *tagState) {
	old := ts.group
	ts.group = p.sh.groupFor(ts.subs)
	if old != nil {
		old.mu.Lock()
		p.sh.post(old)
		old.mu.Unlock()
		p.sh.unuse(old)
	}
}

// publishShared is publish in Shared mode, from the check of the tag on.
// ts.mu is held and released here.
func (p *Publisher) publishShared(ts *tagState, status uint8, parts [][]byte, n int) Status {
	g := ts.group
	if g == nil {
		ts.seq++
		ts.published.Add(1)
		ts.noSubs.Add(1)
		ts.mu.Unlock()
		return NoSubscriptions
	}
	g.mu.Lock()
	st := p.sh.take(g, ts, status, parts, n)
	g.mu.Unlock()
	if st == OK {
		ts.seq++
		ts.published.Add(1)
	} else {
		ts.refused.Add(1)
	}
	ts.mu.Unlock()
	return st
}

// take encodes one message of ts into g's buffer, after a SYNC record if
// it is the tag's first there, posting the buffer first when it is full.
// It answers NoResources, taking nothing, when a Block session of g still
// has a post waiting or no buffer is free. ts.mu and g.mu are held.
func (sh *sharedPool) take(g *group, ts *tagState, status uint8, parts [][]byte, n int) Status {
	if g.hasBlock && !g.blockReady() {
		return NoResources
	}
	if g.cur >= 0 && g.enc.Remaining() < syncMessageLen+coalesce.Overhead(status, true)+n {
		sh.post(g)
	}
	if g.cur < 0 {
		select {
		case idx := <-sh.free:
			g.cur = int32(idx)
		default:
			sh.pub.refusePool(ts)
			return NoResources
		}
		g.curGen = sh.gen.Add(1)
		g.enc.Reset(sh.bufs[g.cur].data)
		g.firstAt = time.Now()
		select { // after cur is set: flushDue either sees it or is told
		case sh.filling <- struct{}{}:
		default:
		}
	}
	b := &sh.bufs[g.cur]
	if ts.shGen != g.curGen {
		rec, _ := g.enc.Reserve(ControlTag, 0, RecordLen) // room checked above
		putRecord((*[RecordLen]byte)(rec), RecordSync, ts.tag, ts.seq)
		ts.shGen, ts.shRun = g.curGen, len(b.runs)
		b.runs = append(b.runs, tagRun{ts: ts})
	}
	_ = g.enc.AppendV(ts.tag, status, parts) // room checked above
	b.runs[ts.shRun].count++
	return OK
}

// blockReady reports whether every Block session of g can take a post
// now: none has one waiting (after trying to send it). g.mu is held.
func (g *group) blockReady() bool {
	for _, ss := range g.sessions {
		if ss.policy != Block || !ss.pending.Load() {
			continue
		}
		ss.mu.Lock()
		ok := ss.drainLocked()
		if !ok {
			ss.markRefused()
		}
		ss.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// post sends g's buffer, if it holds anything, to every session of g.
// g.mu is held.
func (sh *sharedPool) post(g *group) {
	if g.cur < 0 {
		return
	}
	idx := uint32(g.cur)
	g.cur = -1
	b := &sh.bufs[idx]
	b.n = g.enc.Len()
	g.enc.Reset(nil)
	b.refs.Store(1) // the post's own hold
	sh.posted.Add(1)
	for _, ss := range g.sessions {
		ss.postShared(sh, idx)
	}
	sh.release(idx)
}

// flushDue posts the buffers that waited interval or more, listing the
// groups in list (the caller's scratch, returned for reuse), and reports
// whether a buffer is still being filled.
func (sh *sharedPool) flushDue(interval time.Duration, list []*group) ([]*group, bool) {
	sh.groupsMu.Lock()
	for _, g := range sh.groups {
		list = append(list, g)
	}
	sh.groupsMu.Unlock()
	now := time.Now()
	busy := false
	for _, g := range list {
		g.mu.Lock()
		if g.cur >= 0 && now.Sub(g.firstAt) >= interval {
			sh.post(g)
		}
		busy = busy || g.cur >= 0
		g.mu.Unlock()
	}
	clear(list)
	return list[:0], busy
}

// postShared sends buffer idx to ss, or, for a Block session that has no
// room (or a post waiting already), queues it; a Drop session's copy is
// dropped and counted when its connection has no room, or when the
// session already holds a buffer in flight and fewer than the pool's
// reserve are free (see dropReserve). g.mu is held.
func (ss *pubSession) postShared(sh *sharedPool, idx uint32) {
	b := &sh.bufs[idx]
	if ss.policy == Block {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		post := ss.posts.Add(1)
		if len(ss.shq) == 0 {
			if st := ss.sendShared(sh, idx, post); st != netio.NoResources {
				ss.countPost(b, st)
				return
			}
		}
		b.refs.Add(1) // the queue's hold; counted when it is sent or lost
		ss.shq = append(ss.shq, queuedPost{idx: idx, post: post})
		ss.pending.Store(true)
		return
	}
	post := ss.posts.Add(1)
	if ss.shHeld.Load() != 0 && len(sh.free) < sh.reserve {
		ss.countPost(b, netio.NoResources) // the reserve: see dropReserve
		return
	}
	ss.countPost(b, ss.sendShared(sh, idx, post))
}

// queuedPost is a post a Block session had no room for.
type queuedPost struct {
	idx  uint32
	post uint64
}

// countPost counts buffer b's messages as delivered to ss, dropped or
// failed, by what its send answered.
func (ss *pubSession) countPost(b *sharedBuf, st netio.Status) {
	for _, r := range b.runs {
		switch st {
		case netio.OK:
			r.ts.delivered.Add(r.count)
			ss.shDelivered.Add(r.count)
		case netio.NoResources:
			r.ts.dropped.Add(r.count)
			ss.dropped.Add(r.count)
		default:
			r.ts.failed.Add(r.count)
		}
	}
}

// sendShared sends buffer idx to ss, as post number post, with the START
// records owed from before it in front. ss.mu is held for Block.
func (ss *pubSession) sendShared(sh *sharedPool, idx uint32, post uint64) netio.Status {
	var hdr [sharedHeaderMax]byte
	h := 0
	if ss.nStarts.Load() != 0 {
		ss.startMu.Lock()
		defer ss.startMu.Unlock()
		var st netio.Status
		if h, st = ss.startHeader(&hdr, post); st != netio.OK {
			return st
		}
	}
	b := &sh.bufs[idx]
	b.refs.Add(1) // before the send: its completion may come at once
	ss.shHeld.Add(1)
	st := ss.zep.Send(hdr[:h], b.data[:b.n], sharedKeyBit|uint64(idx))
	if st != netio.OK {
		b.refs.Add(-1) // the post holds it too: never the last
		ss.shHeld.Add(-1)
		return st
	}
	sh.sends.Add(1)
	if h != 0 {
		ss.starts = ss.starts[h/syncMessageLen:]
		ss.nStarts.Store(int32(len(ss.starts)))
	}
	return st
}

// startHeader writes the START records owed before post into hdr, after
// sending alone those that do not fit, and returns the header's length.
// ss.startMu is held.
func (ss *pubSession) startHeader(hdr *[sharedHeaderMax]byte, post uint64) (int, netio.Status) {
	for {
		k := 0
		for k < len(ss.starts) && ss.starts[k].post <= post {
			k++
		}
		h := 0
		for _, r := range ss.starts[:min(k, sharedStartsPerHeader)] {
			h += putSyncMessage(hdr[h:], RecordStart, r.tag, r.seq)
		}
		if k <= sharedStartsPerHeader {
			return h, netio.OK
		}
		if st := ss.zep.Send(hdr[:h], nil, zcNoKey); st != netio.OK {
			return 0, st
		}
		ss.starts = ss.starts[sharedStartsPerHeader:]
		ss.nStarts.Store(int32(len(ss.starts)))
	}
}

// oweStart owes ss the START record of a subscription to tag beginning at
// seq. ts.mu is held.
func (ss *pubSession) oweStart(tag, seq uint64) {
	ss.startMu.Lock()
	defer ss.startMu.Unlock()
	ss.starts = append(ss.starts, startRec{tag: tag, seq: seq, post: ss.posts.Load() + 1})
	ss.nStarts.Store(int32(len(ss.starts)))
}

// drainSharedLocked sends a Block session's queued posts, in order, and
// reports whether none is left. A post whose connection is ending is
// lost (its subscriber sees a gap). ss.mu is held.
func (ss *pubSession) drainSharedLocked() bool {
	sh := ss.p.sh
	done := 0
	defer func() { ss.shq = ss.shq[:copy(ss.shq, ss.shq[done:])] }()
	for _, q := range ss.shq {
		st := ss.sendShared(sh, q.idx, q.post)
		if st == netio.NoResources {
			return false
		}
		ss.countPost(&sh.bufs[q.idx], st)
		if st != netio.OK {
			ss.p.lostPending.Add(1)
		}
		done++
		sh.release(q.idx)
	}
	ss.pending.Store(false)
	return true
}

// dropQueued counts the posts still queued for an ending session as
// failed, gives their buffers back and returns how many there were.
// ss.mu is held.
func (ss *pubSession) dropQueued() int {
	n := len(ss.shq)
	for _, q := range ss.shq {
		ss.countPost(&ss.p.sh.bufs[q.idx], netio.Failed)
		ss.p.sh.release(q.idx)
	}
	ss.shq = nil
	return n
}
