package pubsub

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
)

// Zero-copy publishing: every message is one libfabric message holding a
// well-formed coalesced buffer, [SYNC record message] message header, then
// the caller's data, so subscribers read it as they read the other modes.
const (
	// syncMessageLen is a SYNC record as a coalesced message: header word,
	// ControlTag, the record.
	syncMessageLen = coalesce.HeaderWordLen + 8 + RecordLen
	// zcHeaderMax is the longest header of a zero-copy send: a START and a
	// SYNC record message, then the data message's header word, status
	// and tag.
	zcHeaderMax = 2*syncMessageLen + coalesce.HeaderWordLen + 1 + 8
	// zcNoKey marks a send that belongs to no publish (HELLO, a SYNC sent
	// alone).
	zcNoKey = ^uint64(0)
	// Bits of the coalesced format's header word.
	wordTag    = 1 << 31
	wordStatus = 1 << 30
)

// zcEntry is one zero-copy publish in flight: the caller's key, the
// subscribers' sends not yet completed (plus one while Publish runs), and
// how they ended.
type zcEntry struct {
	key        uint64
	remaining  atomic.Int32
	ok, failed atomic.Int32
}

// putSyncMessage writes a SYNC (or START) record of tag and seq as a
// coalesced message into b and returns its length.
func putSyncMessage(b []byte, kind RecordKind, tag, seq uint64) int {
	binary.LittleEndian.PutUint32(b, wordTag|RecordLen)
	binary.LittleEndian.PutUint64(b[4:], ControlTag)
	putRecord((*[RecordLen]byte)(b[12:]), kind, tag, seq)
	return syncMessageLen
}

// putZCHeader writes the header of a zero-copy message into b: the SYNC
// record message of kind kind unless it is 0 (a START is followed by a
// SYNC: nextRecord), then the data message's header word, status (when
// not 0) and tag. It returns the header's length.
func putZCHeader(b *[zcHeaderMax]byte, kind RecordKind, tag, seq uint64, status uint8, size int) int {
	n := 0
	for k := nextRecord(0, kind); k != 0; k = nextRecord(k, 0) {
		n += putSyncMessage(b[n:], k, tag, seq)
	}
	word := uint32(wordTag | size)
	if status != 0 {
		word |= wordStatus
	}
	binary.LittleEndian.PutUint32(b[n:], word)
	n += 4
	if status != 0 {
		b[n] = status
		n++
	}
	binary.LittleEndian.PutUint64(b[n:], tag)
	return n + 8
}

// PublishZeroCopy (ZeroCopy mode) sends data, without copying it, as one
// message of tag with status to every subscriber of tag, and returns like
// Publish. When it returns OK or PartiallyFailed, data belongs to the
// publisher until OnPublishCompleted reports key, once every subscriber's
// send of it has completed; with any other status it was not taken and
// OnPublishCompleted is not called. NoResources also means that
// MaxInFlight publishes are in flight. Keep data in ZeroCopyRegion, or in
// memory that stays put (Go memory is pinned while in flight). In another
// mode it returns InvalidArgument. It never blocks and does not allocate.
func (p *Publisher) PublishZeroCopy(tag uint64, status uint8, data []byte, key uint64) Status {
	if p.cfg.Mode != ZeroCopy {
		return InvalidArgument
	}
	ts := (*p.tags.Load())[tag]
	if ts == nil {
		if p.isClosed.Load() {
			return Closed
		}
		return InvalidArgument
	}
	if len(data) > p.maxPayload {
		return InvalidArgument
	}
	var idx uint32
	select {
	case idx = <-p.zcFree:
	default:
		p.refusePool(ts)
		return NoResources
	}
	e := &p.zc[idx]
	e.key = key
	e.ok.Store(0)
	e.failed.Store(0)
	e.remaining.Store(1) // Publish's own hold, dropped below
	ts.mu.Lock()
	if p.isClosed.Load() {
		ts.mu.Unlock()
		p.zcPut(idx)
		return Closed
	}
	subs := ts.subs
	if st := ts.admit(subs); st != OK {
		p.zcPut(idx)
		return st
	}
	seq := ts.seq
	var ok, bad uint64
	for _, s := range subs {
		e.remaining.Add(1) // before the send: its completion may come at once
		if s.deliverZC(ts, seq, status, data, idx) {
			s.delivered++
			ok++
		} else {
			e.remaining.Add(-1)
			bad++
		}
	}
	unlockBlock(subs)
	ts.seq++
	ts.published.Add(1)
	ts.delivered.Add(ok)
	ts.mu.Unlock()
	if ok == 0 {
		p.zcPut(idx) // no send holds it: nothing to report
		return Failed
	}
	p.zcRelease(idx)
	if bad == 0 {
		return OK
	}
	return PartiallyFailed
}

// zcComplete records the completion of one subscriber's send of publish
// idx.
func (p *Publisher) zcComplete(idx uint32, st netio.Status) {
	e := &p.zc[idx]
	if st == netio.OK {
		e.ok.Add(1)
	} else {
		e.failed.Add(1)
	}
	p.zcRelease(idx)
}

// zcRelease drops one hold on publish idx; the last reports it.
func (p *Publisher) zcRelease(idx uint32) {
	e := &p.zc[idx]
	if e.remaining.Add(-1) != 0 {
		return
	}
	st := OK
	switch {
	case e.failed.Load() > 0 && e.ok.Load() == 0:
		st = Failed
	case e.failed.Load() > 0:
		st = PartiallyFailed
	}
	key := e.key
	p.zcPut(idx)
	if cb := p.cfg.OnPublishCompleted; cb != nil {
		cb(key, st)
	}
}

// zcPut gives publish entry idx back to the pool, waking a WaitRoom
// caller when the pool refused and has a batch free again.
func (p *Publisher) zcPut(idx uint32) {
	p.zcFree <- idx
	p.poolFreed()
}

// deliverZC posts the message to s's zero-copy connection, preceded by
// the SYNC record when one is owed, and reports whether it was taken (a
// Block subscriber's message that finds no header slot waits in its
// pending slot, and counts as taken). ts.mu is held, and s.sess.mu when
// s's policy is Block.
func (s *subscription) deliverZC(ts *tagState, seq uint64, status uint8, data []byte, idx uint32) bool {
	ss := s.sess
	withSync := s.needSync || s.sinceSync >= ss.p.syncEvery
	if withSync && !s.sendStart(ts, seq) {
		return false
	}
	var kind RecordKind
	if withSync {
		kind = s.syncKind()
	}
	var hdr [zcHeaderMax]byte
	n := putZCHeader(&hdr, kind, ts.tag, seq, status, len(data))
	switch ss.zep.Send(hdr[:n], data, uint64(idx)) {
	case netio.OK:
	case netio.NoResources:
		if ss.policy != Block {
			s.drop(ts)
			return false
		}
		ss.setPendingZCLocked(kind, ts.tag, seq, status, data, idx)
	default:
		ts.failed.Add(1)
		return false
	}
	if withSync {
		s.synced(ts)
	}
	s.sinceSync++
	return true
}

// setPendingZCLocked keeps a zero-copy message a Block subscriber had no
// header slot for (the data is the caller's until the publish completes,
// so nothing is copied) and tries once more at once. ss.mu is held.
func (ss *pubSession) setPendingZCLocked(kind RecordKind, tag, seq uint64, status uint8, data []byte, idx uint32) {
	ss.pendSync, ss.pendTag, ss.pendSeq, ss.pendStatus = kind, tag, seq, status
	ss.pendZC, ss.pendIdx = data, idx
	ss.pending.Store(true)
	ss.drainLocked()
}

// drainZCLocked sends the pending zero-copy message, if it can, and
// reports whether Publish may go on. When the connection is ending the
// message stays pending and Publish goes on (its own sends to this
// subscriber fail): end, which follows, reports it failed, with no lock
// held, since OnPublishCompleted may publish again. ss.mu is held.
func (ss *pubSession) drainZCLocked() bool {
	var hdr [zcHeaderMax]byte
	n := putZCHeader(&hdr, ss.pendSync, ss.pendTag, ss.pendSeq, ss.pendStatus, len(ss.pendZC))
	switch ss.zep.Send(hdr[:n], ss.pendZC, uint64(ss.pendIdx)) {
	case netio.NoResources:
		return false
	case netio.OK:
		ss.pendZC = nil
		ss.pending.Store(false)
	}
	return true
}
