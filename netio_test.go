package netio_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
)

func TestStatusStringAndErr(t *testing.T) {
	cases := map[netio.Status]string{
		netio.OK: "OK", netio.NoResources: "NoResources", netio.Failed: "Failed",
		netio.PartiallyFailed: "PartiallyFailed", netio.InvalidArgument: "InvalidArgument",
		netio.Closed: "Closed", netio.Canceled: "Canceled",
	}
	for st, name := range cases {
		assert.Equal(t, name, st.String())
	}
	assert.Equal(t, "Status(200)", netio.Status(200).String())

	assert.NoError(t, netio.OK.Err())
	assert.ErrorIs(t, netio.NoResources.Err(), netio.ErrNoResources)
	assert.ErrorIs(t, netio.InvalidArgument.Err(), netio.ErrInvalidArgument)
	assert.ErrorIs(t, netio.Closed.Err(), netio.ErrClosed)
	assert.ErrorIs(t, netio.Canceled.Err(), netio.ErrCanceled)
	assert.ErrorIs(t, netio.PartiallyFailed.Err(), netio.ErrFailed)
	assert.Contains(t, netio.PartiallyFailed.Err().Error(), "PartiallyFailed")
}

func TestParamsDefaultsAndValidate(t *testing.T) {
	s := netio.BufferedSendParams{}.WithDefaults()
	assert.Equal(t, netio.DefaultSendBufferSize, s.BufferSize)
	assert.Equal(t, netio.DefaultSendBufferCount, s.BufferCount)
	assert.NoError(t, netio.BufferedSendParams{}.Validate())
	assert.Equal(t, 7, netio.BufferedSendParams{BufferSize: 7}.WithDefaults().BufferSize, "set fields are kept")

	r := netio.ReceiveParams{}.WithDefaults()
	assert.Equal(t, netio.DefaultRecvBufferSize, r.BufferSize)
	assert.Equal(t, netio.DefaultRecvBufferCount, r.BufferCount)

	bad := []error{
		netio.BufferedSendParams{BufferSize: -1}.Validate(),
		netio.BufferedSendParams{BufferCount: -5}.Validate(),
		netio.BufferedSendParams{BufferSize: netio.MaxBufferSize + 1}.Validate(),
		netio.BufferedSendParams{BufferCount: netio.MaxBufferCount + 1}.Validate(),
		netio.ReceiveParams{BufferSize: netio.MaxBufferSize, BufferCount: netio.MaxBufferCount}.Validate(),
		netio.ReceiveParams{BufferSize: -1}.Validate(),
	}
	for i, err := range bad {
		assert.True(t, errors.Is(err, netio.ErrInvalidArgument), "case %d: %v", i, err)
	}
}
