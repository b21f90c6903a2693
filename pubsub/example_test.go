package pubsub_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

// A publisher serving two tags and a subscriber to one of them, in one
// process over tcp on loopback.
func Example() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()

	pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1, 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()

	// Callbacks run on the subscriber's poller and must not block: this one
	// hands a copy to a buffered channel.
	got := make(chan string, 16)
	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{
		Bus: pubsub.Fixed(pub.Addr()),
		OnMessage: func(m pubsub.Message) {
			got <- fmt.Sprintf("tag %d seq %d: %s", m.Tag, m.Seq, m.Data)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Subscribe returns once the publisher has acknowledged: everything
	// published from now on is delivered. No sleep needed.
	if err := sub.Subscribe(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pub.Publish(1, []byte("hello")))
	fmt.Println(pub.Publish(2, []byte("nobody listens")))
	fmt.Println(pub.Publish(1, []byte("world")))
	for range 2 {
		fmt.Println(<-got)
	}
	// Output:
	// OK
	// NoSubscriptions
	// OK
	// tag 1 seq 0: hello
	// tag 1 seq 1: world
}

// Publishers announce their tags on a directory bus; a subscriber
// subscribes by tag without knowing addresses, to two publishers at once.
func ExampleDirectory() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	// Every host opens the same directory (a shared file system) and group.
	bus, err := pubsub.OpenDirectory(dir, "daq", pubsub.DirectoryConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	pubA, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{10, 11}, Bus: bus})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pubA.Close() // also removes its file
	pubB, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{20}, Bus: bus})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pubB.Close()
	entries, _ := bus.Entries()
	fmt.Println(len(entries), "publishers on the bus")

	got := make(chan uint64, 16)
	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{
		Bus:       bus,
		OnMessage: func(m pubsub.Message) { got <- m.Tag },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sub.Subscribe(ctx, 10, 20); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(sub.Publishers()), "publishers subscribed to")
	pubA.Publish(10, []byte("from A"))
	pubB.Publish(20, []byte("from B"))
	tags := []uint64{<-got, <-got}
	slices.Sort(tags)
	fmt.Println("tags received:", tags)
	// Output:
	// 2 publishers on the bus
	// 2 publishers subscribed to
	// tags received: [10 20]
}

// The retry rule under Block: when Publish answers NoResources (a
// subscriber has no room), wait in WaitRoom for the same tag, then publish
// the same message again. WaitRoom sleeps until what refused that tag has
// room for a batch, without polling; it waits as long as Publish would
// refuse, so its ctx has a deadline.
func ExamplePublisher_WaitRoom() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()
	pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1}, Mode: pubsub.Shared})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pub.Close()
	var got atomic.Int64
	sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{
		Bus:       pubsub.Fixed(pub.Addr()),
		OnMessage: func(pubsub.Message) { got.Add(1) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sub.Subscribe(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	const n = 100000
	msg := make([]byte, 64)
	for i := range n {
		for st := pub.Publish(1, msg); st != pubsub.OK; st = pub.Publish(1, msg) {
			if st != pubsub.NoResources {
				fmt.Println("message", i, st)
				return
			}
			if err := pub.WaitRoom(ctx, 1); err != nil { // ctx ended or pub closed
				fmt.Println(err)
				return
			}
		}
	}
	pub.Flush()
	for got.Load() < n && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(got.Load(), "messages received")
	// Output:
	// 100000 messages received
}
