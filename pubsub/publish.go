package pubsub

import (
	"github.com/netio-go/netio"
)

// Publish sends data as one message of tag to every subscriber of tag and
// returns OK when every one took it, NoSubscriptions when there is none,
// NoResources when a Block subscriber has no room (nobody took it: retry, after WaitRoom(ctx, tag)),
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
	if p.sh != nil {
		return p.publishShared(ts, status, parts, n)
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
	ts.published.Add(1)
	ts.delivered.Add(ok)
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
		ts.published.Add(1)
		ts.noSubs.Add(1)
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
			ss.markRefused()
			unlockBlock(subs[:i+1])
			ts.refused.Add(1)
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
	if withSync && !s.sendStart(ts, seq) {
		return false
	}
	for kind := RecordKind(0); withSync; {
		if kind = nextRecord(kind, s.syncKind()); kind == 0 {
			break
		}
		var rec [RecordLen]byte
		putRecord(&rec, kind, ts.tag, seq)
		switch ss.ep.SendMessageStatus(ControlTag, 0, rec[:]) {
		case netio.OK:
			s.synced(ts)
		case netio.NoResources:
			if ss.policy == Block {
				s.synced(ts) // the records go with the message
				ss.setPendingLocked(kind, ts.tag, seq, status, parts)
				return true
			}
			s.drop(ts)
			return false
		default:
			ts.failed.Add(1)
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
			ss.setPendingLocked(0, ts.tag, seq, status, parts)
			return true
		}
		s.drop(ts)
		return false
	default:
		ts.failed.Add(1)
		return false
	}
}

// syncKind returns the kind of the SYNC record s is owed: RecordStart
// for the first of its subscription. ts.mu is held.
func (s *subscription) syncKind() RecordKind {
	if s.fresh {
		return RecordStart
	}
	return RecordSync
}

// nextRecord returns the record to send after prev (0: none yet, first
// is the kind owed) before a message: a START whose number is the
// message's is followed by a SYNC of the same number, so that a reader
// of the first version of the protocol, which does not know START and
// ignores it, still learns the number (a START that does not name the
// message's number is sent alone, and the SYNC follows anyway). 0 means
// no more.
func nextRecord(prev, first RecordKind) RecordKind {
	switch prev {
	case 0:
		return first
	case RecordStart:
		return RecordSync
	}
	return 0
}

// synced records that s's SYNC record was taken. ts.mu is held.
func (s *subscription) synced(ts *tagState) {
	s.fresh = false
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
	ts.dropped.Add(1)
	s.sess.dropped.Add(1)
	if !s.needSync {
		s.needSync = true
		ts.unsynced.Add(1)
	}
}

// sendStart sends, before the SYNC record of seq, the one that tells the
// subscriber where a fresh subscription started, when copies were dropped
// before any SYNC record of it got through: without it the subscriber
// would take seq for its start and never learn of those copies. It
// reports whether the message may go on; a copy that cannot is dropped
// (owing a SYNC, which reports it as a gap) or failed. A Block
// subscription needs it only after a copy of it failed (its connection is
// ending, since Block takes every copy or none); its copy is then dropped
// like a Drop one's, and reported the same way. ts.mu is held, and
// s.sess.mu for Block.
func (s *subscription) sendStart(ts *tagState, seq uint64) bool {
	if !s.fresh || seq == s.start {
		return true
	}
	switch s.sendSyncRecord(RecordStart, ts.tag, s.start) {
	case netio.OK:
		s.fresh = false
		return true
	case netio.NoResources:
		s.drop(ts)
	default:
		ts.failed.Add(1)
	}
	return false
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
	if s.fresh && s.start != ts.seq {
		if s.sendSyncRecord(RecordStart, ts.tag, s.start) != netio.OK {
			return // nothing was dropped: try again next tick
		}
		s.fresh = false
	}
	for kind := nextRecord(0, s.syncKind()); kind != 0; kind = nextRecord(kind, 0) {
		if s.sendSyncRecord(kind, ts.tag, ts.seq) != netio.OK {
			return // still owed: try again next tick (a START sent is not sent again)
		}
		s.fresh = false
	}
	s.synced(ts)
}

// sendSyncRecord sends a SYNC (or START) record of tag and seq alone on
// s's connection, in any mode.
func (s *subscription) sendSyncRecord(kind RecordKind, tag, seq uint64) netio.Status {
	ss := s.sess
	if ss.zep != nil {
		var hdr [syncMessageLen]byte
		putSyncMessage(hdr[:], kind, tag, seq)
		return ss.zep.Send(hdr[:], nil, zcNoKey)
	}
	var rec [RecordLen]byte
	putRecord(&rec, kind, tag, seq)
	st := ss.ep.SendMessageStatus(ControlTag, 0, rec[:])
	if st == netio.OK && ss.p.cfg.Mode == Immediate {
		ss.ep.Flush()
	}
	return st
}
