package main

import (
	"context"
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// runInject sends count messages of the sender's size to its peer with
// Inject (client --endpoint rdm --inject). Inject queues each message for
// the poller goroutine and reports none, so the run ends once the
// endpoint's Stats count every one as taken by the provider (Completed)
// or refused (Failed); closing earlier would drop those still queued.
// NoResources (the inject queue, rdmInjectQueue, is full) waits in
// WaitInject, which sleeps until about half the queue is posted: the loop
// neither spins (on 2 busy cores it would take the CPU the poller and the
// receiver need) nor wakes many times per queue, nor lets the poller run
// dry (docs/performance.md, "rdm 64 B inject: the full queue's wait");
// with a pattern, message k carries the pattern of message k.
func (s *sender) runInject(ctx context.Context, ep *rdm.Endpoint, count uint64) error {
	if s.size > ep.InjectSize() {
		return fmt.Errorf("--inject: --size %d is above the provider's inject size %d", s.size, ep.InjectSize())
	}
	to := s.to.(rdmPeer)
	data := make([]byte, s.size)
	for k := uint64(0); k < count; {
		if s.pat != nil {
			s.pat.Fill(data, 0, k)
		}
		switch st := ep.Inject(data, to.peer); st {
		case netio.OK:
			k++
			s.sent.Store(k)
		case netio.NoResources:
			if err := ep.WaitInject(ctx); err != nil {
				return fmt.Errorf("after %d messages: %w", k, err)
			}
		default:
			return fmt.Errorf("inject of message %d: %w", k, st.Err())
		}
	}
	for {
		st := ep.Stats()
		s.completed.Store(st.Completed)
		s.failed.Store(st.Failed)
		if st.Completed+st.Failed >= count {
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d injects still queued: %w", count-st.Completed-st.Failed, count, context.Cause(ctx))
		}
		time.Sleep(100 * time.Microsecond)
	}
	if f := s.failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d injects failed", f, count)
	}
	return nil
}
