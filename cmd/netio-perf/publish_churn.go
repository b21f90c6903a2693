package main

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// The publisher's side of the churn test: publish for as long as anybody
// is subscribed, count the subscriptions made and ended, and report
// whether goroutines and registrations came back to where they were
// before the first subscriber came.

// publishChurn holds the publisher's --until-unsubscribed flag and what
// it counts.
type publishChurn struct {
	untilUnsubscribed bool
	subscribed        atomic.Uint64
	unsubscribed      atomic.Uint64
	idle              baseline
}

// registerChurn adds the flag to fs.
func (c *publishChurn) registerChurn(fs *cmdLine) {
	fs.BoolVar(&c.untilUnsubscribed, "until-unsubscribed", false, "stop publishing once every subscriber has left (at most --count or --duration), and report whether goroutines and registrations came back to their idle baseline")
}

// hook makes cfg count OnSubscribe and OnUnsubscribe.
func (c *publishChurn) hook(cfg *pubsub.PublisherConfig) {
	cfg.OnSubscribe = func(uint64, string) { c.subscribed.Add(1) }
	cfg.OnUnsubscribe = func(uint64, string) { c.unsubscribed.Add(1) }
}

// everyoneLeft reports whether the publishing should stop: with
// --until-unsubscribed, once the publisher has no subscriber.
func (c *publishChurn) everyoneLeft(p *pubsub.Publisher) bool {
	return c.untilUnsubscribed && p.Stats().Subscribers == 0
}

// pubBaseline is where the publisher stood idle and after its subscribers
// left, and the subscriptions it saw made and ended.
type pubBaseline struct {
	SubscribeEvents    uint64 `json:"subscribe_events"`
	UnsubscribeEvents  uint64 `json:"unsubscribe_events"`
	GoroutinesIdle     int    `json:"goroutines_idle"`
	GoroutinesAfter    int    `json:"goroutines_after"`
	RegistrationsIdle  int    `json:"registrations_idle"`
	RegistrationsAfter int    `json:"registrations_after"`
}

// settle waits (at most churnSettle) for the goroutines and registrations
// to come back to the idle baseline, once no subscriber is left, and
// reports where they stand.
func (c *publishChurn) settle(p *pubsub.Publisher, mgr *domain.Manager) *pubBaseline {
	b := &pubBaseline{GoroutinesIdle: c.idle.goroutines, RegistrationsIdle: c.idle.registrations}
	deadline := time.Now().Add(churnSettle)
	for {
		b.GoroutinesAfter = runtime.NumGoroutine()
		b.RegistrationsAfter = mgr.Stats().Registrations
		back := p.Stats().Subscribers == 0 && b.GoroutinesAfter <= b.GoroutinesIdle && b.RegistrationsAfter == b.RegistrationsIdle
		if back || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.SubscribeEvents, b.UnsubscribeEvents = c.subscribed.Load(), c.unsubscribed.Load()
	return b
}
