package main

import (
	"sync"

	"github.com/netio-go/netio/pubsub"
)

// readyPeers tells when a subscriber counts for --subscribers: once the
// publisher has applied its subscribe request whole. Publisher.Subscribers
// lists a request's tags one by one as they are added (in Shared mode each
// after a regroup of the tag's buffers), so counting a subscriber with any
// tag started publishing while its later tags were not yet subscribed,
// and it got fewer messages than it asked for. OnSubscribe runs once every
// tag of the request is in place (pubsub.PublisherConfig.OnSubscribe).
type readyPeers struct {
	mu    sync.Mutex
	peers map[string]bool
}

// hook makes cfg note each peer whose subscribe request was applied,
// besides what cfg's OnSubscribe did already.
func (r *readyPeers) hook(cfg *pubsub.PublisherConfig) {
	r.peers = map[string]bool{}
	prev := cfg.OnSubscribe
	cfg.OnSubscribe = func(tag uint64, peer string) {
		r.mu.Lock()
		r.peers[peer] = true
		r.mu.Unlock()
		if prev != nil {
			prev(tag, peer)
		}
	}
}

// count counts the subscribers subscribed to a tag now whose subscribe
// request was applied whole.
func (r *readyPeers) count(p *pubsub.Publisher) int {
	subs := p.Subscribers()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range subs {
		if len(s.Tags) > 0 && r.peers[s.Peer] {
			n++
		}
	}
	return n
}
