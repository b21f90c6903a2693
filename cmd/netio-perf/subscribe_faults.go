package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// The subscriber's test modes: a stall (a consumer that stops taking
// messages for a while, so that a Drop publisher drops its copies) and
// churn (many subscribe and unsubscribe operations, then nothing: the
// subscriber and its publisher must be back where they started).

// churnWorkers run the churn operations concurrently, as the library's
// own churn test does.
const churnWorkers = 4

// churnSettle bounds the wait, after the churn, for the subscriber's
// goroutines and registrations to come back to their baseline.
const churnSettle = 10 * time.Second

// subscribeFaults are the subscriber's --stall-after, --stall and --churn flags.
type subscribeFaults struct {
	stallAfter uint64
	stall      time.Duration
	churn      int
}

// registerFaults adds the flags to fs.
func (f *subscribeFaults) registerFaults(fs *cmdLine) {
	fs.Uint64Var(&f.stallAfter, "stall-after", 0, "after this many messages, block the message callback for --stall once (a stalled consumer)")
	fs.DurationVar(&f.stall, "stall", 2*time.Second, "how long --stall-after blocks")
	fs.IntVar(&f.churn, "churn", 0, "after subscribing, make this many subscribe/unsubscribe operations on random pairs of --tags, unsubscribe everything, and report whether goroutines and registrations came back to their baseline (instead of --count)")
}

// check refuses negative values.
func (f *subscribeFaults) check() error {
	if f.stall < 0 || f.churn < 0 {
		return errors.New("--stall and --churn must not be negative")
	}
	return nil
}

// staller returns the function OnMessage calls with the number of
// messages received so far, which blocks once, at --stall-after; nil
// without --stall-after.
func (f *subscribeFaults) staller() func(received uint64) {
	if f.stallAfter == 0 {
		return nil
	}
	return func(received uint64) {
		if received == f.stallAfter {
			time.Sleep(f.stall)
		}
	}
}

// churnReport is what the churn did and where it left the subscriber.
type churnReport struct {
	Ops                 int    `json:"ops"`
	Canceled            int    `json:"canceled"` // subscribes withdrawn by a concurrent unsubscribe
	Errors              int    `json:"errors"`   // any other failure
	FirstError          string `json:"first_error,omitempty"`
	PublishersAfter     int    `json:"publishers_after"`
	GoroutinesBase      int    `json:"goroutines_base"`
	GoroutinesAfter     int    `json:"goroutines_after"`
	RegistrationsBase   int    `json:"registrations_base"`
	RegistrationsAfter  int    `json:"registrations_after"`
	SubscribedAfterward int    `json:"subscribed_after"`
	// SilentTags and UnsolicitedSettled are what the check after the
	// churn found (settled): tags subscribed that delivered nothing, and
	// messages dropped as Unsolicited once every tag delivered. Both are 0
	// unless the subscriber and the publisher disagree on what is
	// subscribed: a silent loss.
	SilentTags         int    `json:"silent_tags"`
	UnsolicitedSettled uint64 `json:"unsolicited_settled"`
}

// baseline is the subscriber's state before it subscribed.
type baseline struct {
	goroutines    int
	registrations int
}

// takeBaseline reads it.
func takeBaseline(mgr *domain.Manager) baseline {
	return baseline{runtime.NumGoroutine(), mgr.Stats().Registrations}
}

// runChurn makes ops subscribe and unsubscribe operations on random pairs
// of tags from churnWorkers goroutines, unsubscribes every tag, and waits
// (at most churnSettle) for the subscriber to hold no publisher and for its
// goroutines and registrations to come back to base.
func runChurn(ctx context.Context, sub *pubsub.Subscriber, mgr *domain.Manager, tags []uint64, ops int, base baseline) (*churnReport, error) {
	r := &churnReport{Ops: ops, GoroutinesBase: base.goroutines, RegistrationsBase: base.registrations}
	var canceled, failed atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	for w := range churnWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := w; i < ops; i += churnWorkers {
				pair := []uint64{tags[rng.IntN(len(tags))], tags[rng.IntN(len(tags))]}
				opCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				var err error
				if rng.IntN(2) == 0 {
					err = sub.Subscribe(opCtx, pair...)
				} else {
					err = sub.Unsubscribe(opCtx, pair...)
				}
				cancel()
				switch {
				case err == nil:
				case errors.Is(err, netio.ErrCanceled) && ctx.Err() == nil:
					canceled.Add(1)
				default:
					failed.Add(1)
					firstErr.Do(func() { r.FirstError = err.Error() })
				}
			}
		}()
	}
	wg.Wait()
	r.Canceled, r.Errors = int(canceled.Load()), int(failed.Load())
	if err := settled(ctx, sub, tags, r); err != nil {
		return r, err
	}
	uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sub.Unsubscribe(uctx, tags...); err != nil {
		return r, fmt.Errorf("unsubscribe after the churn: %w", err)
	}
	settle := time.Now().Add(churnSettle)
	for {
		r.PublishersAfter = len(sub.Publishers())
		r.SubscribedAfterward = len(sub.Subscribed())
		r.GoroutinesAfter = runtime.NumGoroutine()
		r.RegistrationsAfter = mgr.Stats().Registrations
		back := r.PublishersAfter == 0 && r.GoroutinesAfter <= base.goroutines && r.RegistrationsAfter == base.registrations
		if back || time.Now().After(settle) || ctx.Err() != nil {
			return r, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settledRun is how many messages each tag must deliver, after the first,
// while settled watches for Unsolicited ones.
const settledRun = 64

// settled subscribes every tag after the churn and watches the traffic
// (at most churnSettle): each tag must deliver messages, and once each
// did, none may arrive for a tag the subscriber does not count (the
// publisher sends it, the subscriber thinks it unsubscribed). It fills
// r.SilentTags and r.UnsolicitedSettled.
func settled(ctx context.Context, sub *pubsub.Subscriber, tags []uint64, r *churnReport) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sub.Subscribe(sctx, tags...); err != nil {
		return fmt.Errorf("subscribe after the churn: %w", err)
	}
	deadline := time.Now().Add(churnSettle)
	start := waitMessages(sub, tags, nil, 1, deadline)
	r.SilentTags = countBelow(sub, tags, nil, 1)
	if r.SilentTags > 0 {
		return nil
	}
	u0 := sub.Stats().Unsolicited
	waitMessages(sub, tags, start, settledRun, deadline)
	r.UnsolicitedSettled = sub.Stats().Unsolicited - u0
	return nil
}

// waitMessages waits until every tag delivered at least n messages more
// than from (nil: since it was subscribed), or deadline passes, and
// returns each tag's count then.
func waitMessages(sub *pubsub.Subscriber, tags []uint64, from map[uint64]uint64, n uint64, deadline time.Time) map[uint64]uint64 {
	for countBelow(sub, tags, from, n) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	now := map[uint64]uint64{}
	for _, t := range tags {
		st, _ := sub.TagStats(t)
		now[t] = st.Messages
	}
	return now
}

// countBelow returns how many tags delivered fewer than n messages more
// than from.
func countBelow(sub *pubsub.Subscriber, tags []uint64, from map[uint64]uint64, n uint64) int {
	below := 0
	for _, t := range tags {
		if st, _ := sub.TagStats(t); st.Messages < from[t]+n {
			below++
		}
	}
	return below
}
