package pubsub

import (
	"maps"
	"slices"

	"github.com/netio-go/netio/stats"
)

// fillStats is the publisher's record in its manager's stats.Registry:
// Stats and the counters of every tag, read from atomics (the tags' locks
// are Publish's).
func (p *Publisher) fillStats(s *stats.Publisher) {
	st := p.Stats()
	s.Subscribers, s.Sessions, s.Requests, s.Malformed = st.Subscribers, st.Sessions, st.Requests, st.Malformed
	s.Refused, s.RefusedSessions = st.Refused, st.RefusedSessions
	s.RoomSleeps, s.RoomWakes, s.RoomTickWakes = st.RoomSleeps, st.RoomWakes, st.RoomTickWakes
	tags := *p.tags.Load()
	s.Tags = make([]stats.PublisherTag, 0, len(tags))
	for _, tag := range slices.Sorted(maps.Keys(tags)) {
		ts := tags[tag]
		s.Tags = append(s.Tags, stats.PublisherTag{Tag: tag, Published: ts.published.Load(), Refused: ts.refused.Load(),
			Delivered: ts.delivered.Load(), Dropped: ts.dropped.Load(), Failed: ts.failed.Load()})
	}
}

// fillStats is the subscriber's record in its manager's stats.Registry:
// Stats and the counters of every tag it wants (all atomics).
func (s *Subscriber) fillStats(r *stats.Subscriber) {
	st := s.Stats()
	r.Buffers, r.Messages, r.Bytes, r.Malformed, r.Unsolicited = st.Buffers, st.Messages, st.Bytes, st.Malformed, st.Unsolicited
	r.Gaps, r.Missed, r.Moves, r.Reconnects = st.Gaps, st.Missed, st.Moves, st.Reconnects
	tags := *s.tags.Load()
	r.Tags = make([]stats.SubscriberTag, 0, len(tags))
	for _, tag := range slices.Sorted(maps.Keys(tags)) {
		rt := tags[tag]
		r.Tags = append(r.Tags, stats.SubscriberTag{Tag: tag, Messages: rt.messages.Load(), Bytes: rt.bytes.Load(),
			Gaps: rt.gaps.Load(), Missed: rt.missed.Load(), Moves: rt.moves.Load()})
	}
}
