package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/rdm"
)

// runInject sends count messages of the sender's size to its peer with
// Inject (client --endpoint rdm --inject): the provider copies each before
// Inject returns and reports no completion, so a message counts as
// completed once Inject took it. NoResources (the provider's queue is
// full, or ofi_rxm still connecting) is retried after a yield; with a
// pattern, message k carries the pattern of message k.
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
			s.completed.Store(k)
		case netio.NoResources:
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("after %d messages: %w", k, context.Cause(ctx))
			}
			runtime.Gosched()
		default:
			return fmt.Errorf("inject of message %d: %w", k, st.Err())
		}
	}
	return nil
}
