package pubsub

// TagStats counts what a subscriber received of one tag.
type TagStats struct {
	Messages      uint64    // messages delivered
	Bytes         uint64    // their payload bytes
	Gaps          uint64    // gaps reported (OnGap)
	Missed        uint64    // messages missed in those gaps
	Resets        uint64    // times the publisher's numbering went back (a restart)
	Moves         uint64    // times the count went over to another publisher (a new count unless both share a Numbering)
	OutOfSequence uint64    // SYNC records behind the count (duplicated or reordered data; never expected)
	Flagged       uint64    // messages with a non-zero status
	StatusBits    [8]uint64 // messages with each status bit set (StatusFirmwareTruncated, ...)
	NextSeq       uint64    // the sequence number expected next
}

// TagStats returns the counters of tag, and false when it is not
// subscribed (wanted). It may be called at any time, from any goroutine.
// Messages and Bytes are published once per buffer, not per message:
// while a buffer is being delivered (from OnMessage, or from another
// goroutine meanwhile) they leave out that buffer's messages, so they are
// at most one buffer late; from OnBuffer on they count it exactly.
// NextSeq follows the delivered messages once per buffer likewise, and is
// set at once at a SYNC record. Gaps, Missed, Resets, Moves,
// OutOfSequence, Flagged and StatusBits are updated at once.
func (s *Subscriber) TagStats(tag uint64) (TagStats, bool) {
	rt := (*s.tags.Load())[tag]
	if rt == nil {
		return TagStats{}, false
	}
	st := TagStats{Messages: rt.messages.Load(), Bytes: rt.bytes.Load(), Gaps: rt.gaps.Load(),
		Missed: rt.missed.Load(), Resets: rt.resets.Load(), Moves: rt.moves.Load(), OutOfSequence: rt.outOfSeq.Load(),
		Flagged: rt.flagged.Load(), NextSeq: rt.expect.Load()}
	for i := range st.StatusBits {
		st.StatusBits[i] = rt.bits[i].Load()
	}
	return st, true
}

// SubscriberStats counts what a subscriber received over all tags:
// netio3's decoder counters and more. Malformed and BadRecords (netio3's
// invalid header and invalid data) are counted here, not per tag
// (TagStats): a header word that breaks the format, or a record whose
// magic or kind is wrong, cannot be tied to a tag.
type SubscriberStats struct {
	Buffers         uint64 // buffers received
	Messages        uint64 // messages delivered (processed)
	Bytes           uint64 // their payload bytes
	Malformed       uint64 // buffers that broke the coalesced format (invalid header): their valid prefix was delivered
	BadRecords      uint64 // control records that did not parse (invalid data)
	Unsolicited     uint64 // messages of tags not subscribed, or from a connection that no longer carries their tag (dropped)
	StrayConns      uint64 // data connections closed for not opening with a known HELLO record
	OutOfSequence   uint64 // SYNC records behind the count
	Gaps            uint64 // gaps reported
	Missed          uint64 // messages missed in those gaps
	Resets          uint64 // numbering resets seen
	Moves           uint64 // tags whose count went over to another publisher
	Reconnects      uint64 // control connections made after a first one to the same publisher
	ControlFailures uint64 // control connections that failed or ended with tags wanted
}

// Stats returns the subscriber's counters. It may be called at any time,
// from any goroutine. Messages and Bytes are published once per buffer,
// as in TagStats: at most one buffer late while a buffer is being
// delivered, exact from OnBuffer on. Buffers, Unsolicited, Gaps, Missed,
// OutOfSequence and the others are updated at once.
func (s *Subscriber) Stats() SubscriberStats {
	st := &s.st
	return SubscriberStats{Buffers: st.buffers.Load(), Messages: st.messages.Load(), Bytes: st.bytes.Load(),
		Malformed: st.malformed.Load(), BadRecords: st.badRecords.Load(), Unsolicited: st.unsolicited.Load(),
		StrayConns: st.stray.Load(), OutOfSequence: st.outOfSeq.Load(), Gaps: st.gaps.Load(),
		Missed: st.missed.Load(), Resets: st.resets.Load(), Moves: st.moves.Load(), Reconnects: st.reconnects.Load(),
		ControlFailures: st.controlErrors.Load()}
}
