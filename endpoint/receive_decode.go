package endpoint

import (
	"fmt"

	"github.com/netio-go/netio"
)

// deliver hands a received buffer to OnData, or decodes it for OnMessage.
// It runs on the poller goroutine.
func (r *ReceiveEndpoint) deliver(data []byte) {
	if r.l.cfg.OnMessage == nil {
		r.l.cfg.OnData(r, data)
		return
	}
	r.decode(data)
}

// decode passes every message of a coalesced buffer to OnMessage, in order,
// and stops early when a callback closes the endpoint. A malformed buffer
// delivers its valid prefix, then is counted and reported.
func (r *ReceiveEndpoint) decode(buf []byte) {
	onMessage := r.l.cfg.OnMessage
	d := &r.dec
	d.Reset(buf)
	for d.Next() {
		onMessage(r, d.Tag(), d.Data(), d.Status())
		if r.state.Load() == stateClosed {
			break
		}
	}
	r.decoded.Add(uint64(d.Count()))
	if err := d.Err(); err != nil {
		r.malformedBuffer(len(buf), err)
	}
}

// malformedBuffer counts, logs and reports a buffer that broke the
// coalesced format.
func (r *ReceiveEndpoint) malformedBuffer(n int, err error) {
	r.malformed.Add(1)
	err = fmt.Errorf("endpoint: connection %d: coalesced buffer of %d bytes: %w", r.id, n, err)
	r.l.log.Warn().Uint64("conn", r.id).Err(err).Msg("malformed coalesced buffer")
	if cb := r.l.cfg.OnReceiveError; cb != nil {
		cb(r, err)
	}
}

// checkDelivery reports whether exactly one of OnData and OnMessage is set.
func (c *ListenConfig) checkDelivery() error {
	switch {
	case c.OnData == nil && c.OnMessage == nil:
		return fmt.Errorf("%w: endpoint: listen without OnData or OnMessage", netio.ErrInvalidArgument)
	case c.OnData != nil && c.OnMessage != nil:
		return fmt.Errorf("%w: endpoint: listen with both OnData and OnMessage: pick one", netio.ErrInvalidArgument)
	}
	return nil
}
