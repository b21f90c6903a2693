package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
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
