package pubsub

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/netio-go/netio"
)

// Waiting for a publisher's acknowledgements: Subscribe waits until
// every tag it asked for is subscribed, Unsubscribe until every tag it
// gave up is no longer subscribed.

// errGone is wait's answer when a tag is no longer wanted at the session
// waited on: a concurrent Unsubscribe withdrew it, a refusal withdrew
// it, or the resolver moved it to another publisher's session (which
// awaitAcks follows).
var errGone = fmt.Errorf("%w: pubsub: tags unsubscribed while subscribing", netio.ErrCanceled)

// awaitAcks waits until every tag of pending is acknowledged by the
// session carrying it, pending[t], deleting each from pending as it is. A
// tag the resolver moved meanwhile to another session (its publisher could
// not be reached for ResolveInterval and the bus names another now) is
// followed there (the caller's cleanup withdraws each tag from wherever it
// is by then). It fails when a tag is refused or carried by no session any
// more (errGone: an Unsubscribe withdrew it), ctx ends, or a session stops.
func (s *Subscriber) awaitAcks(ctx context.Context, pending map[uint64]*subSession) error {
	for len(pending) > 0 {
		var ss *subSession
		for _, ss = range pending {
			break
		}
		var tags []uint64
		for t, x := range pending {
			if x == ss {
				tags = append(tags, t)
			}
		}
		err := ss.wait(ctx, tags)
		switch {
		case err == nil:
			for _, t := range tags {
				delete(pending, t)
			}
		case !errors.Is(err, errGone) || !s.followMoved(tags, pending):
			return err
		}
	}
	return nil
}

// followMoved records, in pending, the session that carries each of tags
// now, after a wait found one of them gone from the session it waited at.
// It reports false when one is carried by no session: withdrawn, not moved.
func (s *Subscriber) followMoved(tags []uint64, pending map[uint64]*subSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tags {
		// Under s.mu, owner[t] == x implies x wants t (wantLocked and
		// unwantLocked change both together), so the next wait at the
		// owner does not find t gone again unless it moves again.
		o := s.owner[t]
		if o == nil {
			return false
		}
		pending[t] = o
	}
	return true
}

// wait returns once every tag is acknowledged, or an error when one was
// refused, ctx ends, or the session stops; errGone when one is no longer
// wanted here (withdrawn, or moved to another session).
func (ss *subSession) wait(ctx context.Context, tags []uint64) error {
	ended := false // the session stopped: read the state once more first
	for {
		ss.mu.Lock()
		var refused []uint64
		done := true
		gone := false
		for _, t := range tags {
			switch {
			case ss.refused[t]:
				refused = append(refused, t)
			case !ss.want[t]:
				gone = true
			case !ss.acked[t]:
				done = false
			}
		}
		ch, lastErr := ss.changed, ss.lastErr
		ss.mu.Unlock()
		switch {
		case len(refused) > 0:
			return fmt.Errorf("%w: publisher %s does not serve tags %v", ErrRefused, ss.addr, refused)
		case gone:
			return errGone
		case done:
			return nil
		case ended:
			return fmt.Errorf("publisher %s: %w", ss.addr, netio.ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("publisher %s: %w (last error: %v)", ss.addr, ctx.Err(), lastErr)
			}
			return fmt.Errorf("publisher %s: %w", ss.addr, ctx.Err())
		case <-ss.done:
			// A session ends when it carries nothing more: its tags
			// were moved or withdrawn, which the state tells (a select
			// that saw the move's signal and the end at once may have
			// picked the end).
			ended = true
		}
	}
}

// waitGone returns once no tag of tags is subscribed at the publisher (or
// the connection is down, which ends them), or ctx ends.
func (ss *subSession) waitGone(ctx context.Context, tags []uint64) error {
	for {
		ss.mu.Lock()
		done := !ss.live
		if !done {
			done = !slices.ContainsFunc(tags, func(t uint64) bool { return ss.leaving[t] })
		}
		ch := ss.changed
		ss.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("publisher %s: %w", ss.addr, ctx.Err())
		case <-ss.done:
			return nil
		}
	}
}
