package netio

import "fmt"

// Status is the result of a hot-path call (send, buffer release) and of a
// completion. It is a small integer so that returning it never allocates.
type Status uint8

const (
	// OK means the operation was accepted (for a post) or succeeded (for a
	// completion).
	OK Status = iota
	// NoResources means nothing is free right now (no buffer, no queue slot);
	// the caller keeps what it holds and may retry later.
	NoResources
	// Failed means the operation failed; for a completion the data was not
	// delivered.
	Failed
	// PartiallyFailed means some parts of a compound operation failed.
	PartiallyFailed
	// InvalidArgument means the call was rejected because of its arguments (an
	// oversize send, an unknown or twice-released buffer ID). Nothing changed.
	InvalidArgument
	// Closed means the endpoint is closed or closing; nothing was posted.
	Closed
	// Canceled means the operation was still pending when its endpoint closed
	// or its connection went away; the data may not have been delivered.
	Canceled
)

var statusNames = [...]string{
	OK:              "OK",
	NoResources:     "NoResources",
	Failed:          "Failed",
	PartiallyFailed: "PartiallyFailed",
	InvalidArgument: "InvalidArgument",
	Closed:          "Closed",
	Canceled:        "Canceled",
}

// String returns the status name, e.g. "NoResources".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Err returns nil for OK and otherwise the sentinel error that matches the
// status, so that a status can be handed to code that works with errors.
func (s Status) Err() error {
	switch s {
	case OK:
		return nil
	case NoResources:
		return ErrNoResources
	case InvalidArgument:
		return ErrInvalidArgument
	case Closed:
		return ErrClosed
	case Canceled:
		return ErrCanceled
	default:
		return fmt.Errorf("netio: %w: %s", ErrFailed, s)
	}
}
