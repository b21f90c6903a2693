package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/pubsub"
)

// TestLogFirstMessage: the line comes once, at the first message, and every
// message still reaches the callback it wraps (or none is needed).
func TestLogFirstMessage(t *testing.T) {
	var out strings.Builder
	var got []uint64
	cfg := pubsub.SubscriberConfig{OnMessage: func(m pubsub.Message) { got = append(got, m.Seq) }}
	logFirstMessage(&cfg, &out)
	assert.Empty(t, out.String(), "nothing before a message")
	cfg.OnMessage(pubsub.Message{Seq: 1, Publisher: "10.77.0.1:7000"})
	cfg.OnMessage(pubsub.Message{Seq: 2, Publisher: "10.77.0.1:7000"})
	assert.Equal(t, "first message from 10.77.0.1:7000\n", out.String())
	assert.Equal(t, []uint64{1, 2}, got)

	var none pubsub.SubscriberConfig
	logFirstMessage(&none, &out)
	assert.NotPanics(t, func() { none.OnMessage(pubsub.Message{}) })
}
