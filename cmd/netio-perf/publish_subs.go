package main

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio/pubsub"
)

// seenSubscribers is every subscriber the publisher served during a run,
// as it last saw each one, by data address. Publisher.Subscribers lists
// only the subscribers served now, and a subscriber that got its --count
// leaves at once: read once at the end, the list missed those that had
// left (often all of them). So the list is read again whenever a
// subscription ends (OnUnsubscribe, when the leaving subscriber's
// counters are final) and merged: counters only grow, so the highest seen
// is the latest; the tags are the most the subscriber held at once.
type seenSubscribers struct {
	pub    atomic.Pointer[pubsub.Publisher]
	mu     sync.Mutex
	byPeer map[string]pubSubscriber
}

// hook makes cfg note the subscribers whenever a subscription ends,
// besides what cfg's OnUnsubscribe did already. Notes begin once watch
// names the publisher.
func (s *seenSubscribers) hook(cfg *pubsub.PublisherConfig) {
	prev := cfg.OnUnsubscribe
	cfg.OnUnsubscribe = func(tag uint64, peer string) {
		if prev != nil {
			prev(tag, peer)
		}
		if p := s.pub.Load(); p != nil {
			s.note(p.Subscribers())
		}
	}
}

// watch names the publisher whose subscribers the hook notes.
func (s *seenSubscribers) watch(p *pubsub.Publisher) { s.pub.Store(p) }

// note merges infos into what was seen.
func (s *seenSubscribers) note(infos []pubsub.SubscriberInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byPeer == nil {
		s.byPeer = map[string]pubSubscriber{}
	}
	for _, in := range infos {
		old := s.byPeer[in.Peer]
		s.byPeer[in.Peer] = pubSubscriber{Peer: in.Peer, Policy: in.Policy.String(), Tags: max(old.Tags, len(in.Tags)),
			Delivered: max(old.Delivered, in.Delivered), Dropped: max(old.Dropped, in.Dropped)}
	}
}

// list returns every subscriber seen, by data address.
func (s *seenSubscribers) list() []pubSubscriber {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]pubSubscriber, 0, len(s.byPeer))
	for _, peer := range slices.Sorted(maps.Keys(s.byPeer)) {
		out = append(out, s.byPeer[peer])
	}
	return out
}
