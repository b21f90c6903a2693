package fabric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// peekOnce peeks at ep and returns its answer: found with the message's
// length, or not found (ENOMSG).
func peekOnce(t *testing.T, s *stack, ep *fabric.Endpoint, ctx uint64) (found bool, length uint64) {
	t.Helper()
	require.Zero(t, ep.Peek(ctx))
	c, cerr := waitCompletion(t, s, 5*time.Second)
	if cerr != nil {
		require.Equal(t, fabric.ENOMSG, cerr.Errno, "a peek fails only with ENOMSG")
		assert.Equal(t, ctx, cerr.Context)
		return false, 0
	}
	assert.Equal(t, ctx, c.Context)
	assert.NotZero(t, c.Flags&fabric.FlagRecv)
	return true, c.Len
}

// TestPeekSockets: sockets answers a peek at once from the messages it
// holds for want of a posted buffer, without taking the message: the
// receive posted afterwards gets it whole, and the next peek finds none.
func TestPeekSockets(t *testing.T) {
	srv, cli := openStack(t, "sockets"), openStack(t, "sockets")
	var sep *fabric.Endpoint
	cep := connectPair(t, srv, cli, func(ep *fabric.Endpoint) { sep = ep })

	found, _ := peekOnce(t, srv, sep, 0x51)
	require.False(t, found, "nothing was sent yet")

	postSend(t, cli, cep, "held by sockets", 0xabcd)
	c, cerr := waitCompletion(t, cli, 5*time.Second)
	require.Nil(t, cerr)
	require.Equal(t, uint64(0xabcd), c.Context)

	// The message reaches sockets' buffered list when its progress thread
	// reads it off the socket: peek until then (bounded).
	var length uint64
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); {
		if found, length = peekOnce(t, srv, sep, 0x52); !found {
			time.Sleep(time.Millisecond)
		}
	}
	require.True(t, found, "the peek never saw the message sockets holds")
	assert.Equal(t, uint64(len("held by sockets")), length)
	found, _ = peekOnce(t, srv, sep, 0x53)
	assert.True(t, found, "a peek leaves the message where it is")

	rbuf := mmap(t, 4096)
	rmr, err := srv.dom.RegisterMemory(addr(rbuf), len(rbuf), fabric.AccessRecv, 1)
	require.NoError(t, err)
	defer rmr.Close()
	require.Zero(t, sep.Recv(addr(rbuf), len(rbuf), rmr.Desc(), 0x1234))
	c, cerr = waitCompletion(t, srv, 5*time.Second)
	require.Nil(t, cerr)
	assert.Equal(t, uint64(0x1234), c.Context)
	assert.Equal(t, "held by sockets", string(rbuf[:c.Len]))

	found, _ = peekOnce(t, srv, sep, 0x54)
	assert.False(t, found, "the receive took the message")
}

// TestPeekClosed: a closed endpoint refuses a peek.
func TestPeekClosed(t *testing.T) {
	s := openStack(t, "sockets")
	ep, err := s.dom.OpenEndpoint(s.info, 1)
	require.NoError(t, err)
	require.NoError(t, ep.Close())
	assert.Equal(t, fabric.EBADF, ep.Peek(1))
}
