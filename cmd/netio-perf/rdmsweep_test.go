package main

import (
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/internal/poll"
)

// closeLog records the order closes came in.
type closeLog []string

// closer is one endpoint of the pair, logging its close into log.
type closer struct {
	name string
	log  *closeLog
}

func (c closer) Close() error {
	*c.log = append(*c.log, c.name)
	return nil
}

// TestCloseRDMPair: the sweep's rdm pair closes sender first, then
// receiver, once the receiver has everything; after a failed stream it
// first waits for that, and on a provider whose endpoints share regions in
// the process (shm) it leaves both open when the wait fails, returning
// the stream's error, since closing the sender then could crash the
// process.
func TestCloseRDMPair(t *testing.T) {
	errStream, errLate := errors.New("stream failed"), errors.New("messages still on their way")
	for _, c := range []struct {
		name          string
		err, settle   error
		sharedRegions bool
		closed        closeLog
		settled       bool
	}{
		{"success", nil, errLate, true, closeLog{"tx", "rx"}, false},
		{"failed stream, everything arrived", errStream, nil, true, closeLog{"tx", "rx"}, true},
		{"failed stream, messages on their way, shm", errStream, errLate, true, nil, true},
		{"failed stream, messages on their way, other providers", errStream, errLate, false, closeLog{"tx", "rx"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log closeLog
			settled := false
			settle := func() error { settled = true; return c.settle }
			err := closeRDMPair(c.err, c.sharedRegions, settle, closer{"tx", &log}, closer{"rx", &log})
			assert.Equal(t, c.closed, log, "closes, in order")
			assert.Equal(t, c.settled, settled, "waited for the receiver")
			if c.err == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, c.err, "the stream's error is returned")
			if c.closed == nil {
				assert.ErrorContains(t, err, "left open")
			}
		})
	}
}

// TestPingPongQuiesce: after a failed ping-pong, quiesce stops the pings
// and waits for the echo of the last one only if one is on its way: none
// before the start, or after a ping that could not be sent (over); a
// started one waits until the echo arrives, or fails at its limit.
func TestPingPongQuiesce(t *testing.T) {
	mgr, err := rdmDomain("tcp;ofi_rxm", "127.0.0.1", zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	client, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, client.Close()) })
	do := poll.Of(client).Do

	p := newPingPong(64, quickBudget)
	assert.NoError(t, p.quiesce(client, time.Hour), "never started: nothing on its way")

	p = newPingPong(64, quickBudget)
	do(func() { p.base, p.over = time.Now(), true })
	assert.NoError(t, p.quiesce(client, time.Hour), "its last ping failed: nothing on its way")

	p = newPingPong(64, quickBudget)
	do(func() { p.base = time.Now() })
	assert.ErrorContains(t, p.quiesce(client, 10*time.Millisecond), "did not arrive", "a ping on its way, never echoed")

	p = newPingPong(64, quickBudget)
	do(func() { p.base = time.Now() })
	done := make(chan error, 1)
	go func() { done <- p.quiesce(client, time.Minute) }()
	require.Eventually(t, func() bool {
		var over bool
		do(func() { over = p.over })
		return over
	}, 10*time.Second, time.Millisecond, "quiesce stops the pings first")
	do(func() { p.onPong(nil, nil) }) // the echo arrives
	assert.NoError(t, <-done, "the echo of the last ping arrived")
	assert.Zero(t, p.trips, "an echo after the stop is not a round trip")
}
