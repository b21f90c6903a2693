package netio

import "errors"

// Sentinel errors. Setup calls wrap them with %w, so callers match them with
// errors.Is; Status.Err maps hot-path results onto the same values.
var (
	// ErrInvalidArgument reports a parameter or argument out of range.
	ErrInvalidArgument = errors.New("netio: invalid argument")
	// ErrNoResources reports that a limit was reached (buffers, registrations,
	// queue slots).
	ErrNoResources = errors.New("netio: no resources")
	// ErrClosed reports an operation on a closed object.
	ErrClosed = errors.New("netio: closed")
	// ErrCanceled reports an operation abandoned because its endpoint closed.
	ErrCanceled = errors.New("netio: canceled")
	// ErrFailed reports an operation that failed for another reason.
	ErrFailed = errors.New("netio: failed")
	// ErrConnectionRefused reports that the peer rejected or refused a
	// connection request.
	ErrConnectionRefused = errors.New("netio: connection refused")
	// ErrConnectionClosed reports that the connection was shut down by the
	// peer or broken.
	ErrConnectionClosed = errors.New("netio: connection closed")
	// ErrBadAddress reports an address that does not parse as HOST:PORT.
	ErrBadAddress = errors.New("netio: bad address")
	// ErrTimeout reports that an operation or a connection made no progress
	// within its time bound.
	ErrTimeout = errors.New("netio: timed out")
	// ErrNotSupported reports a feature the provider does not offer.
	ErrNotSupported = errors.New("netio: not supported")
)
