// Package backoff is the wait of a retry that the other side keeps
// refusing: it starts short, doubles with each refusal up to a cap, and
// starts short again once the other side takes something. The send paths
// share it: the send core's stalled hand-off queue, a reconnecting
// sender's refused backlog and its dials, and rdm's parked sends to a peer
// the provider refuses.
package backoff

import "time"

// Doubling is a retry's wait: First at the start and after progress, twice
// the last after each refusal, at most Max. It is a small value kept in
// the retrying struct, not safe for concurrent use (its owner's lock or
// goroutine guards it), and it never allocates. The zero value waits 0;
// make one with New.
type Doubling struct {
	first, max, wait time.Duration
}

// New returns a Doubling that waits first, doubling up to limit (a limit
// below first is taken as first).
func New(first, limit time.Duration) Doubling {
	return Doubling{first: first, max: max(first, limit), wait: first}
}

// Wait returns the wait before the next retry.
func (d *Doubling) Wait() time.Duration { return d.wait }

// Refused doubles the wait (up to the cap) after a retry the other side
// refused, and returns the new wait. A cap near the largest Duration (a
// user's) does not overflow: the wait past half of it is the cap.
func (d *Doubling) Refused() time.Duration {
	if d.wait > d.max/2 {
		d.wait = d.max
	} else {
		d.wait *= 2
	}
	return d.wait
}

// BackedOff reports whether a retry refused without a break for
// refusedFor has backed off: refusedFor is at least the cap. A shorter
// refusal is taken as one that ends soon (a full queue, a connection
// being made), retried at the first wait (RefusedFor).
func (d *Doubling) BackedOff(refusedFor time.Duration) bool { return refusedFor >= d.max }

// RefusedFor is Refused for a retry refused without a break for
// refusedFor, once that has BackedOff; before, the wait stays as it is.
func (d *Doubling) RefusedFor(refusedFor time.Duration) time.Duration {
	if d.BackedOff(refusedFor) {
		return d.Refused()
	}
	return d.wait
}

// Reset brings the wait back to the first: the other side took something.
func (d *Doubling) Reset() { d.wait = d.first }
