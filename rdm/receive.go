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
	if r.Unposted { // the poller's read could not post the queued repost
		e.postAgain(idx, r.Errno)
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
	e.postReceive(idx, true)
}

// postAgain retries a repost the provider refused with errno: once at
// once when the provider's receive queue was full (EAGAIN, usually
// passing), else it reports the buffer lost.
func (e *Endpoint) postAgain(idx uint32, errno fabric.Errno) {
	if errno != fabric.EAGAIN {
		e.repostFailed(idx, errno)
		return
	}
	e.postReceive(idx, false)
}

// postReceive posts receive buffer idx, unless the endpoint closed:
// through the poller's next read (viaRead), else at once. A refusal with
// EAGAIN is tried once more at once; another one reports the buffer lost.
func (e *Endpoint) postReceive(idx uint32, viaRead bool) {
	ep, ok := e.c.Guard.Acquire()
	if !ok {
		return
	}
	defer e.c.Guard.Release()
	b := e.recv.Piece(idx)
	ctx := e.c.Owner.Context(idx | recvKey)
	errno := fabric.EAGAIN
	if viaRead {
		errno = e.c.Poller.Repost(ep, b.Addr, len(b.Bytes), b.Desc, ctx)
	}
	if errno == fabric.EAGAIN {
		errno = ep.Recv(b.Addr, len(b.Bytes), b.Desc, ctx)
	}
	if errno != 0 {
		e.repostFailed(idx, errno)
	}
}

// repostFailed reports a receive buffer the provider would not take again
// (counted, logged and passed to OnReceiveError): it stays out of use.
func (e *Endpoint) repostFailed(idx uint32, errno fabric.Errno) {
	e.reportReceiveError(fmt.Errorf("%w: rdm: receive buffer %d could not be posted again and stays out of use: %w",
		netio.ErrFailed, idx, errno))
}

// deliver hands a received message to OnData, or decodes it for OnMessage,
// in order, stopping early when a callback closes the endpoint. A
// malformed buffer delivers its valid prefix, then is counted and
// reported. The messages decoded are counted after the loop, or, when a
// callback closes the endpoint, by releaseResources inside that Close,
// before the endpoint's counters are final. It runs on the poller
// goroutine.
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
	n, err := d.Count(), d.Err()
	// Counted once: a Close in OnReceiveError below finds none to count.
	d.Reset(nil)
	if !e.freeAfterOnData { // else releaseResources counted them
		e.decoded.Add(uint64(n))
	}
	if err != nil {
		e.reportReceiveError(fmt.Errorf("%w: rdm: coalesced buffer of %d bytes from %q: %w",
			netio.ErrFailed, len(data), e.PeerAddr(from), err))
	}
}
