package main

import (
	"slices"
	"sync"

	"github.com/netio-go/netio/pubsub"
)

// pubPeers is what the publish mode keeps of its subscribers beyond what
// Publisher.Subscribers lists now, so that neither the start of the
// publishing nor the report depends on how the machine schedules it.
//
// Ready: a subscriber counts for --subscribers once the publisher has
// applied its subscribe request whole. Subscribers lists a request's tags
// one by one as they are added (in Shared mode each after a regroup of the
// tag's buffers), so counting a subscriber with any tag started publishing
// while its later tags were not yet subscribed, and it got fewer messages
// than it asked for. OnSubscribe runs once every tag of the request is in
// place (pubsub.PublisherConfig.OnSubscribe).
//
// Departed: a subscriber that has everything it asked for leaves, and may
// do so before the publisher gets to its report (a loaded machine); the
// report lists it with its record as it left, taken in OnUnsubscribe.
type pubPeers struct {
	mu       sync.Mutex
	p        *pubsub.Publisher
	ready    map[string][]uint64 // the tags each peer subscribed, once applied
	departed map[string]pubsub.SubscriberInfo
}

// hook makes cfg record, beside what its callbacks already do, each peer
// whose subscribe request was applied and each peer's record as its
// subscriptions end. Call start with the publisher once it is open.
func (r *pubPeers) hook(cfg *pubsub.PublisherConfig) {
	r.ready, r.departed = map[string][]uint64{}, map[string]pubsub.SubscriberInfo{}
	onSub, onUnsub := cfg.OnSubscribe, cfg.OnUnsubscribe
	cfg.OnSubscribe = func(tag uint64, peer string) {
		r.mu.Lock()
		if !slices.Contains(r.ready[peer], tag) {
			r.ready[peer] = append(r.ready[peer], tag)
		}
		r.mu.Unlock()
		if onSub != nil {
			onSub(tag, peer)
		}
	}
	cfg.OnUnsubscribe = func(tag uint64, peer string) {
		r.leaving(peer)
		if onUnsub != nil {
			onUnsub(tag, peer)
		}
	}
}

// start gives the hooks the publisher they report on.
func (r *pubPeers) start(p *pubsub.Publisher) {
	r.mu.Lock()
	r.p = p
	r.mu.Unlock()
}

// leaving keeps peer's record as one of its subscriptions ends: the last
// one leaves the record with everything delivered to it. Its tags are
// every tag it subscribed.
func (r *pubPeers) leaving(peer string) {
	r.mu.Lock()
	p := r.p
	r.mu.Unlock()
	if p == nil {
		return
	}
	for _, s := range p.Subscribers() {
		if s.Peer != peer {
			continue
		}
		r.mu.Lock()
		s.Tags = slices.Sorted(slices.Values(r.ready[peer]))
		r.departed[peer] = s
		r.mu.Unlock()
	}
}

// readyCount counts the subscribers subscribed to a tag now whose
// subscribe request was applied whole.
func (r *pubPeers) readyCount(p *pubsub.Publisher) int {
	subs := p.Subscribers()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range subs {
		if len(s.Tags) > 0 && len(r.ready[s.Peer]) > 0 {
			n++
		}
	}
	return n
}

// all returns every subscriber that subscribed: those listed now, and
// those that left, as they left.
func (r *pubPeers) all(p *pubsub.Publisher) []pubsub.SubscriberInfo {
	out := p.Subscribers()
	r.mu.Lock()
	defer r.mu.Unlock()
	listed := map[string]bool{}
	for _, s := range out {
		listed[s.Peer] = true
	}
	for peer, s := range r.departed {
		if !listed[peer] {
			out = append(out, s)
		}
	}
	return out
}
