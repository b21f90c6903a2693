package main

import (
	"fmt"
	"io"

	"github.com/netio-go/netio/pubsub"
)

// logFirstMessage makes the subscriber say "first message from ADDR" on w
// when its first message arrives, once (subscribe --log): for a test or an
// operator waiting for data to flow, such as tests/netns killing a
// publisher mid-run. It wraps cfg.OnMessage, which runs on the poller
// goroutine; the write happens once.
func logFirstMessage(cfg *pubsub.SubscriberConfig, w io.Writer) {
	next, said := cfg.OnMessage, false
	cfg.OnMessage = func(m pubsub.Message) {
		if !said {
			said = true
			fmt.Fprintf(w, "first message from %s\n", m.Publisher)
		}
		if next != nil {
			next(m)
		}
	}
}
