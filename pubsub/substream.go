package pubsub

// Which stream of sequence numbers a subscriber counts a tag in.
//
// A tag's numbers are a publisher's: a count goes on only where the
// numbering does. Each control connection names its numbering in the ack
// of its hello (PublisherConfig.Numbering; none: the publisher's
// subscription address), and the subscriber counts a tag on one data
// connection at a time, of the one publisher the tag is subscribed at
// (its owner, which the bus chose). When a record of the tag comes on a
// newer connection of that publisher, or on a connection of the publisher
// the tag moved to, the count moves there: in the same numbering it goes
// on (what was skipped is a gap, numbers that went back a reset); in
// another it starts afresh, without a gap, and the move is counted
// (TagStats.Moves). docs/wire.md, "Sequence numbers", is the rule.

// tagAck is the subscribe ack a tag's count starts from: the generation
// of the connection it came on, the number of the subscription's first
// message, and the numbering of that number.
type tagAck struct {
	gen, first, stream uint64
}

// ackedAt records the subscribe ack of the tag on connection gen, whose
// numbering is stream: the first ack in a numbering is kept (a later one,
// after a reconnection, leaves it, so that the count goes on from the
// first subscription); an ack in another numbering (the tag moved)
// replaces it. The control goroutine calls it; the poller reads it.
func (rt *recvTag) ackedAt(gen, first, stream uint64) {
	if a := rt.ack.Load(); a != nil && a.stream == stream {
		return
	}
	rt.ack.Store(&tagAck{gen: gen, first: first, stream: stream})
}

// setOwnerLocked records that tag t is subscribed at ss (nil: nowhere),
// for the poller. s.mu is held.
func (s *Subscriber) setOwnerLocked(t uint64, ss *subSession) {
	if rt := (*s.tags.Load())[t]; rt != nil {
		rt.owner.Store(ss)
	}
}

// streamID returns the number standing for the numbering of a publisher
// at addr that named it numbering in its hello ack (empty: its own,
// named by addr). Equal names get equal numbers; 0 is none.
func (s *Subscriber) streamID(addr, numbering string) uint64 {
	key := "addr " + addr
	if numbering != "" {
		key = "name " + numbering
	}
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	id, ok := s.streams[key]
	if !ok {
		id = uint64(len(s.streams)) + 1
		s.streams[key] = id
	}
	return id
}

// follow handles a record of rt's tag numbered seq on dc, a data
// connection other than the one the tag is counted on. It moves the
// count to dc when dc belongs to the publisher the tag is subscribed at
// and is not older than the connection counted so far of that publisher;
// records of any other connection (an earlier publisher of the tag, an
// older connection) are ignored. Poller goroutine.
func (s *Subscriber) follow(rt *recvTag, dc *dataConn, seq uint64, start bool) {
	if rt.owner.Load() != dc.sess || rt.sess == dc.sess && dc.gen < rt.gen {
		return
	}
	// Set from the hello ack, before the subscription whose record this
	// is was asked for.
	stream := dc.stream.Load()
	ack := rt.ack.Load()
	if ack != nil && ack.stream != stream {
		ack = nil // an ack of another numbering: nothing to count from
	}
	if ack != nil && dc.gen == ack.gen && seq < ack.first {
		return // a record of an earlier subscription of the tag on the ack's connection
	}
	exp, counting := rt.next, rt.synced && rt.stream == stream
	if !counting && ack != nil && !(start && dc.gen == ack.gen) {
		// The subscription's count starts at its ack (the START on the
		// ack's connection starts it itself): what was missed before this
		// record, on a connection lost at once or dropped before the
		// record got through, is a gap.
		exp, counting = ack.first, true
	}
	if rt.synced && rt.sess != dc.sess {
		rt.moves.Add(1)
		s.st.moves.Add(1)
	}
	rt.gen, rt.sess, rt.stream, rt.synced = dc.gen, dc.sess, stream, true
	rt.setNext(seq)
	switch {
	case !counting:
	case seq > exp:
		s.gap(dc, rt, exp, seq-exp)
	case seq < exp: // the numbering went back: a restart that did not continue it
		rt.resets.Add(1)
		s.st.resets.Add(1)
		if cb := s.cfg.OnGap; cb != nil {
			cb(Gap{Publisher: dc.pub, Tag: rt.tag, First: seq, Reset: true})
		}
	}
}
