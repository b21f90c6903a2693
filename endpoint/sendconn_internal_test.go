package endpoint

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
)

// A Close while the dial waits for its answer (from OnReply, whose reply
// the poller may read before the connected event) ends the wait at once
// with netio.ErrClosed; it does not wait out the dial's context. The
// connected event that comes after finds the connection closed and
// changes nothing.
func TestCloseWhileConnecting(t *testing.T) {
	var c sendConn
	c.connected = make(chan error, 1)
	assert.NoError(t, c.close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assert.ErrorIs(t, c.wait(ctx), netio.ErrClosed)
	assert.NoError(t, ctx.Err(), "the dial waited out its context")
	assert.Equal(t, stateClosed, c.state.Load())
	assert.NoError(t, c.close(), "a second Close")
	assert.Empty(t, c.connected, "a second answer to the dial")
}
