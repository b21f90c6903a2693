package pubsub

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
)

// Status is the result of Publish and its variants: netio3's publish
// statuses. It is its own type because netio.Status has no
// NoSubscriptions; the values that exist in both convert with Netio.
type Status uint8

const (
	// OK means every subscriber of the tag took the message.
	OK Status = iota
	// NoResources means a subscriber with the Block policy, or the
	// publisher's pool (Shared buffers, ZeroCopy MaxInFlight), could not
	// take the message: nobody got it, no sequence number was used, and the
	// caller keeps its data and may retry, after Publisher.WaitRoom (never
	// from a callback).
	NoResources
	// Failed means no subscriber got the message: every copy was dropped
	// (Drop policy) or its connection was ending.
	Failed
	// PartiallyFailed means some subscribers got the message and others'
	// copies were dropped or failed.
	PartiallyFailed
	// NoSubscriptions means the tag has no subscriber: the message went
	// nowhere, and used a sequence number.
	NoSubscriptions
	// InvalidArgument means the tag is not served (AddTags), or the
	// message cannot fit in a send buffer. Nothing changed.
	InvalidArgument
	// Closed means the publisher is closed.
	Closed
)

var statusNames = [...]string{
	OK:              "OK",
	NoResources:     "NoResources",
	Failed:          "Failed",
	PartiallyFailed: "PartiallyFailed",
	NoSubscriptions: "NoSubscriptions",
	InvalidArgument: "InvalidArgument",
	Closed:          "Closed",
}

// ErrNoSubscriptions is Status NoSubscriptions as an error.
var ErrNoSubscriptions = errors.New("pubsub: no subscriptions")

// String returns the status name, e.g. "NoSubscriptions".
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Netio returns the netio.Status of the same meaning; NoSubscriptions has
// none and maps to netio.Failed.
func (s Status) Netio() netio.Status {
	switch s {
	case OK:
		return netio.OK
	case NoResources:
		return netio.NoResources
	case PartiallyFailed:
		return netio.PartiallyFailed
	case InvalidArgument:
		return netio.InvalidArgument
	case Closed:
		return netio.Closed
	default:
		return netio.Failed
	}
}

// Err returns nil for OK and otherwise an error matching the netio
// sentinel of the same meaning (ErrNoSubscriptions for NoSubscriptions).
func (s Status) Err() error {
	switch s {
	case OK:
		return nil
	case NoSubscriptions:
		return ErrNoSubscriptions
	case PartiallyFailed:
		return fmt.Errorf("pubsub: %w: %s", netio.ErrFailed, s)
	default:
		return s.Netio().Err()
	}
}
