package netio_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
)

// TestBadInputParams: every out-of-range field of both parameter types is
// an error wrapping ErrInvalidArgument that names the kind of buffer, and
// WithDefaults keeps bad values as given, so Validate still sees them.
func TestBadInputParams(t *testing.T) {
	type validator interface{ Validate() error }
	for name, p := range map[string]validator{
		"send size -1":            netio.BufferedSendParams{BufferSize: -1},
		"send size MinInt":        netio.BufferedSendParams{BufferSize: math.MinInt},
		"send size above max":     netio.BufferedSendParams{BufferSize: netio.MaxBufferSize + 1},
		"send count -1":           netio.BufferedSendParams{BufferCount: -1},
		"send count above max":    netio.BufferedSendParams{BufferCount: netio.MaxBufferCount + 1},
		"send region too large":   netio.BufferedSendParams{BufferSize: netio.MaxBufferSize, BufferCount: netio.MaxBufferCount},
		"receive size -1":         netio.ReceiveParams{BufferSize: -1},
		"receive size MaxInt":     netio.ReceiveParams{BufferSize: math.MaxInt},
		"receive count -1":        netio.ReceiveParams{BufferCount: -1},
		"receive count MinInt":    netio.ReceiveParams{BufferCount: math.MinInt},
		"receive count above max": netio.ReceiveParams{BufferCount: netio.MaxBufferCount + 1},
		"receive region too large": netio.ReceiveParams{BufferSize: netio.MaxBufferSize / 2,
			BufferCount: netio.MaxBufferCount},
	} {
		err := p.Validate()
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, name)
		if _, send := p.(netio.BufferedSendParams); send {
			assert.Contains(t, err.Error(), "send", name)
		} else {
			assert.Contains(t, err.Error(), "receive", name)
		}
	}
	assert.Equal(t, -1, netio.BufferedSendParams{BufferSize: -1}.WithDefaults().BufferSize)
	assert.Equal(t, -1, netio.ReceiveParams{BufferCount: -1}.WithDefaults().BufferCount)
}

// TestBadInputStatus: a Status outside the defined values still has a name
// and maps to ErrFailed, never to nil (which would read as success).
func TestBadInputStatus(t *testing.T) {
	for _, st := range []netio.Status{netio.Canceled + 1, 100, math.MaxUint8} {
		assert.Regexp(t, `^Status\(\d+\)$`, st.String())
		assert.ErrorIs(t, st.Err(), netio.ErrFailed, "%d", uint8(st))
	}
}
