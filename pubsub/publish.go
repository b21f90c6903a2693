package pubsub

import (
	"github.com/netio-go/netio"
)

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
			ss.setPendingLocked(false, ts.tag, seq, status, parts)
			return true
		}
		s.drop(ts)
		return false
	default:
		ts.failed.Add(1)
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
	ts.dropped.Add(1)
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
