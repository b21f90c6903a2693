package endpoint

import (
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
)

// checkInject refuses Inject with DeliveryComplete: an inject completes
// once the provider has copied it, never once it is placed at the peer;
// and a negative InjectLinger or MaxInjectsHeld, with Inject or without:
// bad input is refused wherever it is.
func (c *SendConfig) checkInject() error {
	if c.Inject && c.DeliveryComplete {
		return fmt.Errorf("%w: endpoint: Inject and DeliveryComplete exclude each other", netio.ErrInvalidArgument)
	}
	if c.InjectLinger < 0 {
		return fmt.Errorf("%w: endpoint: negative InjectLinger %v", netio.ErrInvalidArgument, c.InjectLinger)
	}
	if c.MaxInjectsHeld < 0 {
		return fmt.Errorf("%w: endpoint: negative MaxInjectsHeld %d", netio.ErrInvalidArgument, c.MaxInjectsHeld)
	}
	return nil
}

// postInject injects buffer key's first n bytes (SendConfig.Inject): the
// provider copies them before it returns, so the send core reports the
// key without a completion. The inject is counted once sent, so that
// Close can wait for it (sendcore.Core.ConfirmInjects), unless the
// provider has no counters (confirmInjects). It runs where postSend runs.
func (s *SendEndpointBuffered) postInject(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
	b := s.pool.Lookup(uint64(key)).Bytes()[:n]
	if !s.c.injectCounted() { // a provider without counters (confirmInjects)
		return ep.Inject(b)
	}
	return ep.InjectCounted(b, s.c.Owner.Context(poll.UnreportedKey))
}

// DefaultMaxInjectsHeld is SendConfig.MaxInjectsHeld when 0.
const DefaultMaxInjectsHeld = sendcore.DefaultMaxHeld

// InjectSize returns the largest message SendBuffer injects with
// SendConfig.Inject (the provider's inject_size), or 0 when it injects
// none: Inject is off.
func (s *SendEndpointBuffered) InjectSize() int {
	if !s.cfg.Inject {
		return 0
	}
	return s.c.InjectSize()
}
