package pubsub

import (
	"slices"
)

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
	return PublisherTagStats{Published: ts.published.Load(), NoSubscriptions: ts.noSubs.Load(), Refused: ts.refused.Load(),
		Delivered: ts.delivered.Load(), Dropped: ts.dropped.Load(), Failed: ts.failed.Load(), Subscribers: len(ts.subs), NextSeq: ts.seq}, true
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
	LostPending     uint64 // messages waiting for a Block subscriber whose connection ended (Shared mode: buffers; their messages count as Failed)
	SharedBuffers   uint64 // Shared mode: buffers posted, each encoded once
	SharedSends     uint64 // Shared mode: sends of those buffers to subscribers that took them
	SharedFree      int    // Shared mode: buffers free now (all of MaxInFlight when nothing is in flight)
	SharedFlushes   uint64 // Shared mode: housekeeping rounds that looked for partly filled buffers (none while none is filled), each counted before it posts anything
	RoomSleeps      uint64 // times a WaitRoom call slept until woken
	RoomWakes       uint64 // WaitRoom wakes from send completions (a refusing subscriber or the pool has room for a batch again) or a refusing subscriber's subscription ending
	RoomTickWakes   uint64 // WaitRoom wakes by the housekeeping tick: a refusal let go with room for less than a batch (a slow or stalled subscriber)
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	p.mu.Lock()
	n := len(p.sessions)
	p.mu.Unlock()
	st := PublisherStats{Tags: len(*p.tags.Load()), Subscribers: n, Sessions: p.sessionsTotal.Load(),
		Requests: p.requests.Load(), Malformed: p.malformed.Load(), Refused: p.refusedRequests.Load(),
		RefusedSessions: p.refusedSessions.Load(), RefusedTags: p.refusedTags.Load(), LostPending: p.lostPending.Load(),
		RoomSleeps: p.room.sleeps.Load(), RoomWakes: p.room.wakes.Load(), RoomTickWakes: p.room.tickWakes.Load()}
	if p.sh != nil {
		st.SharedBuffers, st.SharedSends, st.SharedFree = p.sh.posted.Load(), p.sh.sends.Load(), len(p.sh.free)
		st.SharedFlushes = p.sh.flushRounds.Load()
	}
	return st
}

// SubscriberInfo describes one subscriber of a publisher.
type SubscriberInfo struct {
	Peer      string   // its data address
	Policy    Policy   // Block or Drop
	Tags      []uint64 // its tags, in increasing order
	Delivered uint64   // copies its connection took, over all its subscriptions
	Dropped   uint64   // its copies dropped, over all its subscriptions
	Pending   bool     // a message waits for room in its connection (Block)
	InFlight  int      // Shared mode: shared buffers its sends hold (a stalled subscriber's stay)
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
		delivered := ss.ended + ss.shDelivered.Load() // a subscription listed here ends later: counted once
		ss.subsMu.Unlock()
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
			Dropped: ss.dropped.Load(), Pending: ss.pending.Load(), InFlight: int(ss.shHeld.Load())})
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
