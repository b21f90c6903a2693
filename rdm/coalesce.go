package rdm

import (
	"fmt"
	"sync"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/coalescer"
	"github.com/netio-go/netio/sendbuf"
)

// CoalesceConfig turns on small-message coalescing (Config.Coalesce): each
// peer gets a coalescing buffer of its own, and SendMessage and its
// variants copy messages into it in netio3's coalesced format
// (docs/wire.md, package coalesce). A peer's buffer goes out as one
// libfabric message when the next message does not fit, when
// FlushInterval has passed since its first message, on Flush, and on
// Close; the same contract, format and tags as endpoint.CoalesceConfig on
// a connection. The peer must decode the buffers (Config.OnMessage, a
// listener with endpoint.ListenConfig.OnMessage semantics, or a netio3
// peer).
//
// Each peer's buffer has a flusher goroutine and a timer, made by AddPeer
// and ended by RemovePeer and Close.
//
// A coalescing endpoint owns its send buffers: GetBuffer returns nil, and
// SendBuffer and ReleaseBuffer return InvalidArgument. Buffers sent count
// in Stats (one send each) and their completions are reported through
// Config.OnSendCompleted with the buffer ID as the key.
type CoalesceConfig struct {
	// FlushInterval is the longest a peer's buffer waits for more
	// messages after its first one. 0 selects
	// endpoint.DefaultCoalesceFlushInterval (1 ms); negative is an error.
	FlushInterval time.Duration
}

// CoalesceStats counts what coalescing did, summed over the endpoint's
// peers, removed ones included. The fields mean what they mean in
// endpoint.CoalesceStats; Dropped also counts the messages of a peer's
// buffer that were not posted when RemovePeer removed it.
type CoalesceStats struct {
	Messages, Bytes, Pending, Buffers                           uint64
	FullFlushes, IntervalFlushes, ExplicitFlushes, CloseFlushes uint64
	Dropped                                                     uint64
}

func (c *CoalesceConfig) validate() error {
	if c != nil && c.FlushInterval < 0 {
		return fmt.Errorf("%w: rdm: negative Coalesce.FlushInterval %v", netio.ErrInvalidArgument, c.FlushInterval)
	}
	return nil
}

// coalescers are what an endpoint keeps of its peers' coalescers beyond the
// peer table: the counts of those that ended.
type coalescers struct {
	mu    sync.Mutex
	ended coalescer.Stats
	// allEnded: teardown ended every peer's coalescer, whose counts are in
	// ended now although the peer table still holds them until release.
	allEnded bool
	// counts are every peer's coalescer's, live or ended, for snapshots.
	counts coalescer.Counts
}

// newCoalescer starts the coalescer of a peer just added. It runs on the
// poller goroutine, inside AddPeer.
func (e *Endpoint) newCoalescer(p Peer, name string) *coalescer.Coalescer {
	return coalescer.NewShared(&peerTarget{e: e, to: p}, e.bufs.Pool.BufferSize(), e.cfg.Coalesce.FlushInterval, e.c.Log, name, &e.cos.counts)
}

// endCoalescerLocked ends a peer's coalescer (a removed peer, or Close)
// and keeps its counts. The caller holds e.cos.mu (see CoalesceStats).
func (e *Endpoint) endCoalescerLocked(co *coalescer.Coalescer) {
	if co == nil {
		return
	}
	co.End()
	e.cos.ended.Add(co.Stats())
}

// peerTarget is a peer's coalescer's view of the endpoint.
type peerTarget struct {
	e  *Endpoint
	to Peer
}

func (t *peerTarget) Take() *sendbuf.NetworkBuffer { return t.e.take() }
func (t *peerTarget) Post(buf *sendbuf.NetworkBuffer, n int) netio.Status {
	return t.e.post(buf, n, t.to)
}

// PostLast is Post: rdm's injects have no bound that refuses them.
func (t *peerTarget) PostLast(buf *sendbuf.NetworkBuffer, n int) netio.Status { return t.Post(buf, n) }
func (t *peerTarget) Release(buf *sendbuf.NetworkBuffer) {
	t.e.bufs.Set.Release(uint32(buf.ID()), t.e.holder)
}
func (t *peerTarget) Ended() bool { return t.e.c.Ended() }

// SendMessage copies data into peer to's coalescing buffer as one message
// with tag and status 0 (see CoalesceConfig). It returns OK when the
// message was taken; NoResources when no send buffer is free or the
// hand-off queue is full (nothing taken: retry after a completion, not by
// spinning inside a callback); InvalidArgument, changing nothing, when the
// endpoint is not coalescing, the peer is unknown or removed, or the
// message cannot fit in an empty buffer; Closed after Close (or while
// RemovePeer removes the peer); Failed when the provider refused to post
// the full buffer. data may be reused at once. It is safe for concurrent
// use and does not allocate.
func (e *Endpoint) SendMessage(tag uint64, data []byte, to Peer) netio.Status {
	return e.SendMessageStatus(tag, 0, to, data)
}

// SendMessageV is SendMessage for a payload given in parts: the message's
// payload is their concatenation.
func (e *Endpoint) SendMessageV(tag uint64, parts [][]byte, to Peer) netio.Status {
	return e.SendMessageStatus(tag, 0, to, parts...)
}

// SendMessageStatus is SendMessage with netio3's 8-bit per-message status
// (0 is none and costs no byte on the wire) and the payload in parts.
func (e *Endpoint) SendMessageStatus(tag uint64, status uint8, to Peer, parts ...[]byte) netio.Status {
	if e.c.Ended() {
		return netio.Closed
	}
	co := e.peers.coalescer(to)
	if co == nil {
		return netio.InvalidArgument
	}
	return co.Send(tag, status, parts...)
}

// Flush posts peer to's coalescing buffer now, if it holds messages: OK
// when it did or there was nothing to post; NoResources (retry);
// InvalidArgument when the endpoint is not coalescing or the peer is
// unknown or removed; Closed; Failed. It does not wait for the send to
// complete: OnSendCompleted reports that.
func (e *Endpoint) Flush(to Peer) netio.Status {
	if e.c.Ended() {
		return netio.Closed
	}
	co := e.peers.coalescer(to)
	if co == nil {
		return netio.InvalidArgument
	}
	return co.Flush()
}

// CoalesceStats returns the coalescing counters of every peer, removed
// ones included; all zero when the endpoint is not coalescing.
func (e *Endpoint) CoalesceStats() CoalesceStats {
	// Under cos.mu, which RemovePeer holds from taking a peer out of the
	// table to adding its counts to the ended ones: each peer is counted
	// once, so the totals never go back.
	e.cos.mu.Lock()
	defer e.cos.mu.Unlock()
	sum := e.cos.ended
	if !e.cos.allEnded {
		e.peers.eachCoalescer(func(co *coalescer.Coalescer) { sum.Add(co.Stats()) })
	}
	return CoalesceStats(sum)
}

// flushAllOnClose posts every peer's buffer as Close begins.
func (e *Endpoint) flushAllOnClose() {
	e.peers.eachCoalescer((*coalescer.Coalescer).FlushOnClose)
}

// endAllCoalescers ends every peer's coalescer at teardown: what was not
// posted is dropped and counted, and the flushers return.
func (e *Endpoint) endAllCoalescers() {
	e.cos.mu.Lock()
	defer e.cos.mu.Unlock()
	e.peers.eachCoalescer(e.endCoalescerLocked)
	e.cos.allEnded = true
}
