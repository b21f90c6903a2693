// Command pubsub runs a publisher serving four tags and a subscriber to two
// of them in one process, over libfabric's tcp provider on 127.0.0.1:
// it publishes 10000 messages on every tag, checks that the subscriber got
// exactly those of its tags, in order, with no gap, and prints a summary.
// It exits non-zero on any error.
//
//	go run ./examples/pubsub
//
// Between processes or hosts the code is the same: the subscriber's
// domain is opened on its own host's address, and its Bus names the
// publisher's subscription address (pubsub.Fixed) or a directory every
// host sees (pubsub.OpenDirectory).
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

const (
	messages = 10000
	msgSize  = 256
	timeout  = 20 * time.Second
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pubsub:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		return err
	}
	// Deferred closes run in reverse: subscriber, publisher, then the domain.
	defer func() { err = errors.Join(err, mgr.Close()) }()

	pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{
		Tags:   []uint64{1, 2, 3, 4},
		Policy: pubsub.Block, // a subscriber that falls behind slows the publisher; nothing is lost
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pub.Close()) }()

	// Callbacks run on the subscriber's poller goroutine and must not
	// block: these only check and count.
	var received, bad, gaps atomic.Uint64
	next := map[uint64]*atomic.Uint64{2: {}, 4: {}}
	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{
		Bus: pubsub.Fixed(pub.Addr()),
		OnMessage: func(m pubsub.Message) {
			want := next[m.Tag]
			if want == nil || len(m.Data) != msgSize || binary.LittleEndian.Uint64(m.Data) != want.Load() || m.Seq != want.Load() {
				bad.Add(1)
			}
			if want != nil {
				want.Add(1)
			}
			received.Add(1)
		},
		OnGap: func(g pubsub.Gap) { gaps.Add(g.Count) },
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sub.Close()) }()

	// Subscribe returns once the publisher has acknowledged: everything
	// published from then on is delivered.
	if err := sub.Subscribe(ctx, 2, 4); err != nil {
		return err
	}

	start := time.Now()
	msg := make([]byte, msgSize)
	for i := range uint64(messages) {
		binary.LittleEndian.PutUint64(msg, i)
		for tag := uint64(1); tag <= 4; tag++ {
			for {
				st := pub.Publish(tag, msg)
				if st == pubsub.OK || st == pubsub.NoSubscriptions {
					break
				}
				if st != pubsub.NoResources {
					return fmt.Errorf("publish tag %d message %d: %v", tag, i, st)
				}
				if ctx.Err() != nil {
					return fmt.Errorf("publish tag %d message %d: still NoResources: %w", tag, i, ctx.Err())
				}
				time.Sleep(10 * time.Microsecond) // Block: retry later
			}
		}
	}
	for received.Load() < 2*messages {
		if ctx.Err() != nil {
			return fmt.Errorf("received %d of %d messages: %w", received.Load(), 2*messages, ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	if bad.Load() != 0 || gaps.Load() != 0 {
		return fmt.Errorf("%d messages out of order or corrupt, %d missed", bad.Load(), gaps.Load())
	}
	st2, _ := sub.TagStats(2)
	st1, _ := pub.TagStats(1)
	fmt.Printf("published %d messages on each of 4 tags; the subscriber to tags 2 and 4 got %d (tag 2: %d, next seq %d), "+
		"in order, no gap, in %v; tag 1 went to nobody (%d NoSubscriptions)\n",
		messages, received.Load(), st2.Messages, st2.NextSeq, elapsed.Round(time.Millisecond), st1.NoSubscriptions)
	return nil
}
