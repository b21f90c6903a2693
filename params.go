package netio

import "fmt"

// Defaults for the parameter types. They suit fragments of a few KiB on a
// loopback or Ethernet provider; readout programs usually set their own.
const (
	DefaultSendBufferSize    = 64 << 10
	DefaultSendBufferCount   = 64
	DefaultRecvBufferSize    = 64 << 10
	DefaultRecvBufferCount   = 64
	MaxBufferSize            = 1 << 30
	MaxBufferCount           = 1 << 20
	maxRegionBytes           = 1 << 36
	defaultNotSetDescription = "0 selects the default"
)

// BufferedSendParams configures a buffered send endpoint: how many registered
// send buffers it has and how large each is. The zero value selects the
// defaults.
type BufferedSendParams struct {
	// BufferSize is the size of each send buffer in bytes, and so the largest
	// message SendBuffer accepts. 0 selects DefaultSendBufferSize.
	BufferSize int
	// BufferCount is the number of send buffers, and so the largest number of
	// sends in flight. 0 selects DefaultSendBufferCount.
	BufferCount int
}

// WithDefaults returns p with every zero field replaced by its default.
func (p BufferedSendParams) WithDefaults() BufferedSendParams {
	if p.BufferSize == 0 {
		p.BufferSize = DefaultSendBufferSize
	}
	if p.BufferCount == 0 {
		p.BufferCount = DefaultSendBufferCount
	}
	return p
}

// Validate reports whether the parameters (after defaults) are usable. The
// error wraps ErrInvalidArgument.
func (p BufferedSendParams) Validate() error {
	p = p.WithDefaults()
	return validateBuffers("send", p.BufferSize, p.BufferCount)
}

// ReceiveParams configures a receive endpoint: how many buffers it keeps
// posted and how large each is. A message larger than BufferSize cannot be
// received. The zero value selects the defaults.
//
// Keep BufferCount at least the number of messages a sender keeps in flight:
// messages that arrive before a buffer is posted wait in the provider, and
// the sockets provider of libfabric 1.17 livelocks on that path under CPU
// load.
type ReceiveParams struct {
	// BufferSize is the size of each posted receive buffer in bytes.
	// 0 selects DefaultRecvBufferSize.
	BufferSize int
	// BufferCount is the number of buffers kept posted. 0 selects
	// DefaultRecvBufferCount.
	BufferCount int
}

// WithDefaults returns p with every zero field replaced by its default.
func (p ReceiveParams) WithDefaults() ReceiveParams {
	if p.BufferSize == 0 {
		p.BufferSize = DefaultRecvBufferSize
	}
	if p.BufferCount == 0 {
		p.BufferCount = DefaultRecvBufferCount
	}
	return p
}

// Validate reports whether the parameters (after defaults) are usable. The
// error wraps ErrInvalidArgument.
func (p ReceiveParams) Validate() error {
	p = p.WithDefaults()
	return validateBuffers("receive", p.BufferSize, p.BufferCount)
}

func validateBuffers(kind string, size, count int) error {
	switch {
	case size < 0 || size > MaxBufferSize:
		return fmt.Errorf("%w: %s buffer size %d outside 1..%d (%s)", ErrInvalidArgument, kind, size, MaxBufferSize, defaultNotSetDescription)
	case count < 0 || count > MaxBufferCount:
		return fmt.Errorf("%w: %s buffer count %d outside 1..%d (%s)", ErrInvalidArgument, kind, count, MaxBufferCount, defaultNotSetDescription)
	case int64(size)*int64(count) > maxRegionBytes:
		return fmt.Errorf("%w: %s buffers %d x %d bytes exceed %d bytes", ErrInvalidArgument, kind, count, size, int64(maxRegionBytes))
	}
	return nil
}
