package rdm

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// postReceives posts every receive buffer, in batches.
func (e *Endpoint) postReceives(ep *fabric.Endpoint) error {
	return e.recv.PostReceives(ep, func(i uint32) uint64 { return e.c.Owner.Context(i | recvKey) })
}

// receiveCompleted delivers a received message, or reports a failed
// receive, then posts the buffer again. It runs on the poller goroutine.
func (e *Endpoint) receiveCompleted(idx uint32, r poll.Result) {
	if e.c.Ended() || int(idx) >= e.recv.Len() {
		return // closing: the buffers are going away
	}
	if r.Status != netio.OK {
		e.receiveFailed(idx, r)
		return
	}
	from := e.peers.from(r.Source)
	data := e.recv.Piece(idx).Bytes[:r.Len:r.Len]
	e.received.Add(1)
	e.receivedBytes.Add(uint64(r.Len))
	e.inOnData = true
	e.deliver(from, data)
	e.inOnData = false
	if e.freeAfterOnData {
		_ = e.recv.Close() // OnData closed the endpoint
		return
	}
	e.repost(idx)
}

// receiveFailed counts and reports a failed receive, and posts the buffer
// again unless posting it is what failed.
func (e *Endpoint) receiveFailed(idx uint32, r poll.Result) {
	if r.Status == netio.Canceled {
		return // the endpoint is closing
	}
	if r.Unposted {
		e.repostFailed(idx, r.Errno)
		return
	}
	err := fmt.Errorf("%w: receive of %d bytes: %w", netio.ErrFailed, r.Len, r.Errno)
	if errors.Is(r.Errno, fabric.ETRUNC) {
		err = fmt.Errorf("%w: a message larger than the %d-byte receive buffers: %w",
			netio.ErrFailed, e.cfg.Receive.BufferSize, r.Errno)
	}
	e.reportReceiveError(err)
	e.repost(idx)
}

// reportReceiveError counts, logs and reports a receive that failed or a
// buffer that could not be decoded.
func (e *Endpoint) reportReceiveError(err error) {
	e.receiveErrors.Add(1)
	e.c.Log.Warn().Err(err).Msg("rdm receive failed")
	if cb := e.cfg.OnReceiveError; cb != nil {
		cb(e, err)
	}
}

// repost posts receive buffer idx again, unless the endpoint closed: the
// poller's next read posts it (poll.Poller.Repost).
func (e *Endpoint) repost(idx uint32) {
	ep, ok := e.c.Guard.Acquire()
	if !ok {
		return
	}
	defer e.c.Guard.Release()
	b := e.recv.Piece(idx)
	if errno := e.c.Poller.Repost(ep, b.Addr, len(b.Bytes), b.Desc, e.c.Owner.Context(idx|recvKey)); errno != 0 {
		e.repostFailed(idx, errno)
	}
}

// repostFailed counts and logs a receive buffer the provider would not
// take again; it stays out of use.
func (e *Endpoint) repostFailed(idx uint32, errno fabric.Errno) {
	e.receiveErrors.Add(1)
	e.c.Log.Error().Err(errno).Uint32("buffer", idx).Msg("rdm: reposting a receive buffer failed")
}

// deliver hands a received message to OnData, or decodes it for OnMessage,
// in order, stopping early when a callback closes the endpoint. A
// malformed buffer delivers its valid prefix, then is counted and
// reported. It runs on the poller goroutine.
func (e *Endpoint) deliver(from Peer, data []byte) {
	if e.cfg.OnMessage == nil {
		e.cfg.OnData(e, from, data)
		return
	}
	d := &e.dec
	d.Reset(data)
	for d.Next() {
		e.cfg.OnMessage(e, from, d.Tag(), d.Data(), d.Status())
		if e.c.Ended() {
			break
		}
	}
	e.decoded.Add(uint64(d.Count()))
	if err := d.Err(); err != nil {
		e.reportReceiveError(fmt.Errorf("%w: rdm: coalesced buffer of %d bytes from %q: %w",
			netio.ErrFailed, len(data), e.PeerAddr(from), err))
	}
}
