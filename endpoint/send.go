package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"math"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/coalescer"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/sendbuf"
	"github.com/netio-go/netio/stats"
)

// SendConfig configures a buffered send endpoint.
type SendConfig struct {
	// Params sets the buffer size and count; defaults apply to zero fields.
	Params netio.BufferedSendParams
	// Buffers says where the send buffers come from: the zero value
	// registers the endpoint's own, sendbuf.Shared and sendbuf.Pooled
	// name the others.
	Buffers sendbuf.Source
	// OnSendCompleted is called once per buffer handed to SendBuffer (or
	// posted by coalescing). Its key is the buffer's ID
	// (NetworkBuffer.ID). The status is OK when the provider completed the
	// send, Failed for an error completion or for a send queued for the
	// poller (HandOffSize) that the provider then refused to take,
	// Canceled when the endpoint closed first. The buffer is back in the
	// pool when it runs. With Inject, an injected send's buffer is back
	// when SendBuffer returns, so the same ID may be sent again before the
	// earlier send's key is reported; injected sends are reported in the
	// order they were sent. It runs on the poller goroutine and must not
	// block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnConnectionClosed is called once when the connection ends: with
	// netio.ErrClosed after Close, or an error matching
	// netio.ErrConnectionClosed when the peer shut down or the connection
	// broke (also netio.ErrTimeout when ProgressTimeout ended it). It runs
	// on the poller goroutine and must not block. May be nil.
	OnConnectionClosed func(err error)
	// DeliveryComplete makes a send complete (OnSendCompleted with OK) only
	// once the message is in a posted receive buffer of the peer, not when
	// the provider has taken it: a message lost because the peer closed the
	// connection is then reported, never counted as sent (a netio
	// receiver that closes the connection first delivers what was placed:
	// see ReceiveEndpoint.Close). A peer process killed after placement but
	// before OnData ran can still lose up to its posted buffers' worth;
	// only an application acknowledgement covers that. It costs an
	// acknowledgement per message. Providers that do not honour it (see docs/providers.md) make Dial fail with
	// netio.ErrNotSupported.
	DeliveryComplete bool
	// ProgressTimeout ends the connection when sends are pending and none
	// has completed for this long: a peer or link that stopped taking data
	// (a cable pulled, a host hung) then fails the pending sends with their
	// keys within about 1.25 × ProgressTimeout instead of after the
	// kernel's TCP retransmission limit (many minutes). OnConnectionClosed
	// gets an error matching netio.ErrConnectionClosed and netio.ErrTimeout.
	// Set it well above the longest stall a healthy receiver may impose
	// (back-pressure). 0 disables it. On sockets it fires only when the
	// provider itself stops taking data: sockets completes sends once it has
	// buffered them, and buffers what a stalled peer leaves.
	ProgressTimeout time.Duration
	// Coalesce, when set, turns on small-message coalescing: SendMessage,
	// SendMessageV, SendMessageStatus and Flush pack messages into the
	// endpoint's buffers in netio3's format, for a peer that decodes them
	// (ListenConfig.OnMessage). The endpoint then owns its buffers, so
	// GetBuffer, SendBuffer and ReleaseBuffer refuse. See CoalesceConfig.
	Coalesce *CoalesceConfig
	// Replies, when set, has the endpoint receive what the peer sends back
	// on the same connection (a listener with ListenConfig.Replies); see
	// DialReplies. Nil keeps the connection one-way.
	Replies *DialReplies
	// Inject posts a message of at most the provider's inject_size bytes
	// (InjectSize; 128 on a tcp connection here, 255 on sockets) as an
	// inject (fi_sendmsg with FI_INJECT, counted by a send counter; plain
	// fi_inject without counters, below): the provider copies it and
	// writes no completion, and the
	// endpoint reports its key OK on the poller goroutine at once. That saves the provider's
	// completion and, on tcp, a syscall per message (docs/performance.md).
	// OK then means the provider holds a copy, not that it has left the
	// provider: the provider queues it while the peer's socket is full, and
	// fi_close discards that queue. So the endpoint counts the injects the
	// provider has sent (a send counter), and Close first waits, up to
	// InjectLinger, until the provider holds no send: no inject, and no
	// regular send either (one pending holds Close too, as the injects
	// queued behind it do); the injects it still holds
	// when the endpoint ends (the peer stalled past the linger, the
	// connection broke, Close from a callback, which does not wait) are
	// logged and counted in SendStats.InjectsUnconfirmed: reported OK, and
	// may not have arrived. On a provider without send counters
	// (fi_cntr_open says ENOSYS or EOPNOTSUPP) the injects are not
	// confirmed: Close does not wait for them, InjectsUnconfirmed stays 0
	// although some may be lost, and the first such endpoint logs a
	// warning. It excludes DeliveryComplete. ProgressTimeout
	// sees only sends posted with a completion: injects to a stalled peer
	// are reported OK, and the stall shows as NoResources from SendBuffer
	// once the provider holds MaxInjectsHeld sends. See inject.go.
	Inject bool
	// InjectLinger bounds how long Close waits for the provider to send
	// the injects it took (Inject); 0 means 1 s. Negative is an error,
	// with Inject or without (bad input is refused wherever it is).
	// Close waits only while the provider holds sends, injects or regular
	// ones queued before them (a receiver that keeps up ends it at once); called from
	// a callback of this endpoint's poller it does not wait, from one of
	// another poller it holds that poller meanwhile.
	InjectLinger time.Duration
	// MaxInjectsHeld bounds what the provider holds for a stalled peer
	// with Inject: once it holds this many sends unsent (injects and
	// regular ones; the send counter tells), SendBuffer refuses a message
	// it would inject with NoResources, keeping nothing (the caller keeps
	// buf), until the peer takes enough again. tcp queues every inject a
	// stalled peer leaves without a limit of its own (docs/providers.md).
	// No completion signals that room is back (the injects were reported
	// OK when taken): retry after a pause, a millisecond say, not in a
	// tight loop, as each refused try reads the counter (fi_cntr_read and
	// fi_cntr_readerr, each a progress pass over the endpoint on tcp). It
	// is exact for one sending goroutine; each further goroutine sending
	// at the same time may add one. A send already queued for the poller
	// waits instead (OK meant queued), and a coalescing endpoint's Close
	// posts its last buffer past the bound. 0 means DefaultMaxInjectsHeld
	// (4096). It is ignored without Inject, but negative is an error even
	// then, as for InjectLinger. On a provider without send counters
	// nothing of the library's bounds it: only the provider's own queue,
	// whatever that takes.
	MaxInjectsHeld int
	// Runtime names the poller to share and the logger.
	cq.Runtime
}

func (c *SendConfig) validate(mgr *domain.Manager) error {
	if mgr == nil {
		return fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	}
	c.Params = c.Params.WithDefaults()
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if err := checkProgressTimeout(c.ProgressTimeout); err != nil {
		return err
	}
	if err := c.Coalesce.validate(); err != nil {
		return err
	}
	if err := c.checkReplies(mgr); err != nil {
		return err
	}
	if err := c.checkInject(); err != nil {
		return err
	}
	return c.Buffers.Check(mgr)
}

// options are the send core's settings from c.
func (c *SendConfig) options() connOptions {
	return connOptions{Options: sendcore.Options{Poller: c.Poller, PollerConfig: c.PollerConfig, Log: c.Logger,
		OnClosed: c.OnConnectionClosed, OnSendCompleted: c.OnSendCompleted, Inject: c.Inject},
		deliveryComplete: c.DeliveryComplete, progressTimeout: c.ProgressTimeout, injectLinger: c.InjectLinger,
		maxInjectsHeld: c.MaxInjectsHeld}
}

// SendStats counts what a send endpoint did.
type SendStats struct {
	Sent      uint64 // messages posted, or queued for the poller to post (HandOffSize)
	Bytes     uint64 // bytes posted
	Completed uint64 // sends completed OK
	Failed    uint64 // sends that completed with an error or were canceled
	// InjectsUnconfirmed counts injects reported OK (in Completed) that the
	// provider still held when the endpoint ended: they may not have
	// reached the peer (SendConfig.Inject). Always 0 without Inject.
	InjectsUnconfirmed uint64

	// What the peer sent back (SendConfig.Replies); zero without it.
	Received      uint64 // replies passed to OnReply
	ReceivedBytes uint64 // bytes of those replies
	ReceiveErrors uint64 // reply receives that completed with an error
}

func sendStats(s sendcore.Snapshot) SendStats {
	return SendStats{Sent: s.Sent, Bytes: s.Bytes, Completed: s.Completed, Failed: s.Failed + s.Canceled}
}

// SendEndpointBuffered sends messages from registered buffers (netio3's
// SendEndpointBuffered): GetBuffer, fill, SendBuffer; the completion returns
// the buffer and reports its ID as the key. With SendConfig.Coalesce it
// packs small messages into those buffers instead (SendMessage).
type SendEndpointBuffered struct {
	c      sendConn
	cfg    SendConfig
	holder uint64 // identity in the buffer pool, unique in the process
	bufs   sendcore.Buffers
	pool   *sendbuf.Pool        // bufs.Pool
	set    *slots.Set           // bufs.Set: the buffer states, the table of sends in flight
	co     *coalescer.Coalescer // nil unless SendConfig.Coalesce is set

	replies *replyInbox // nil unless SendConfig.Replies is set
}

// Dial connects to the listener at addr ("HOST:PORT") through mgr's domain
// and returns a buffered send endpoint. It honours ctx's deadline and
// cancellation, and applies DefaultDialTimeout when ctx has no deadline. A
// refused connection matches netio.ErrConnectionRefused.
//
// The endpoint asks the provider for messages only (FI_MSG), so that a
// listener that asked for no more, such as a plain C libfabric server, accepts
// it on sockets too. The peer may still Pull from and Push into regions
// exposed on this side: tcp and sockets check those against the
// registration's access, not the endpoint's capabilities.
func Dial(ctx context.Context, mgr *domain.Manager, addr string, cfg SendConfig) (*SendEndpointBuffered, error) {
	return dialKind(ctx, mgr, addr, cfg, stats.KindBuffered)
}

// dialKind is Dial, registering the endpoint in the manager's
// stats.Registry as statsKind ("": not at all).
func dialKind(ctx context.Context, mgr *domain.Manager, addr string, cfg SendConfig, statsKind string) (*SendEndpointBuffered, error) {
	if err := cfg.validate(mgr); err != nil {
		return nil, err
	}
	host, port, err := splitAddr(addr, false)
	if err != nil {
		return nil, err
	}
	s := &SendEndpointBuffered{cfg: cfg, holder: sendcore.NewHolder()}
	s.c.addr = addr
	o := cfg.options()
	o.statsKind = statsKind
	o.beforeConnect = s.postReplies
	o.drains = cfg.Replies != nil
	o.OnClosed = s.replyClosed(o.OnClosed)
	if err := s.c.dial(ctx, mgr, (*bufferedKind)(s), host, port, o, s.prepare); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare sets up the buffers, and the coalescing over them when asked.
func (s *SendEndpointBuffered) prepare() error {
	var err error
	if s.bufs, err = sendcore.OpenBuffers(s.cfg.Buffers, s.c.Mgr, s.cfg.Params); err != nil {
		return err
	}
	s.pool, s.set = s.bufs.Pool, s.bufs.Set
	s.c.InitHandOff(s.pool.Len(), s.postSend)
	s.c.InitInject(s.pool.Len(), (*bufferedKind)(s), s.postInject)
	s.startCoalescing()
	return s.openReplies()
}

// GetBuffer leases a free registered buffer, or returns nil when none is
// free, the endpoint is closed, or it is coalescing. Fill buf.Bytes() and
// pass it to SendBuffer, or give it back with ReleaseBuffer.
func (s *SendEndpointBuffered) GetBuffer() *sendbuf.NetworkBuffer {
	if s.co != nil || s.c.Ended() {
		return nil
	}
	return s.take()
}

// take leases a free buffer to the endpoint, or returns nil. A Take that
// raced the end gives the buffer back: teardown marks the end before it
// reclaims the endpoint's buffers, so either Reclaim sees this one leased
// or this check sees the end, and a shared pool never keeps a buffer
// leased to an endpoint that is gone.
func (s *SendEndpointBuffered) take() *sendbuf.NetworkBuffer {
	id, ok := s.set.Take(s.holder)
	if !ok {
		return nil
	}
	if s.c.Ended() {
		s.set.Release(id, s.holder)
		return nil
	}
	return s.pool.Lookup(uint64(id))
}

// SendBuffer sends the first size bytes of buf as one message and hands buf
// to the endpoint until its completion. It returns OK when posted;
// NoResources when the transmit queue is full (the caller keeps buf and may
// retry); InvalidArgument for a buffer not leased from this endpoint, a
// size outside 0..buf.Size(), or a coalescing endpoint; Closed after Close
// or connection loss; Failed when the provider refuses the post. It does
// not allocate.
//
// A message of HandOffSize bytes or more, and any message sent while one
// is still waiting, is posted by the poller goroutine rather than by the
// caller (see HandOffSize for why): OK then means queued, in order, and a
// post the provider refuses comes back through OnSendCompleted with
// Failed, as an error completion would. Messages are sent in the order of
// the SendBuffer calls that returned OK either way.
//
// With SendConfig.Inject a message of at most InjectSize bytes is posted
// with fi_inject: buf goes back to the endpoint's free buffers when
// SendBuffer returns OK, and OnSendCompleted reports its key later, on the
// poller goroutine. Such a message is refused with NoResources (the caller
// keeps buf) while the provider holds SendConfig.MaxInjectsHeld sends; no
// completion follows to say when to retry: retry after a pause (a
// millisecond, say), as each refused try reads the send counter, which
// progresses the endpoint on tcp.
func (s *SendEndpointBuffered) SendBuffer(buf *sendbuf.NetworkBuffer, size int) netio.Status {
	if buf == nil {
		return netio.InvalidArgument
	}
	return s.sendKeyed(buf, size, buf.ID())
}

// sendKeyed is SendBuffer with the key OnSendCompleted reports for this
// send: the buffer's ID for SendBuffer, the message's key for the
// ReconnectingSender, which so needs no table of its own. The key goes
// into the buffer's slot with the post, so a buffer posted again before
// its previous completion was reported cannot mix the two up.
func (s *SendEndpointBuffered) sendKeyed(buf *sendbuf.NetworkBuffer, size int, key uint64) netio.Status {
	if s.co != nil || !s.pool.Owns(buf) || size < 0 || size > buf.Size() {
		return netio.InvalidArgument
	}
	return s.post(buf, size, key, false)
}

// post sends the first size bytes of buf, one of the pool's buffers: from
// the calling goroutine, or through the poller goroutine for a large
// message or one that must not overtake those queued there
// (sendcore.Core.Send); regular posts it with a completion, never as an
// inject, when it goes from the calling goroutine (Core.SendRegular).
func (s *SendEndpointBuffered) post(buf *sendbuf.NetworkBuffer, size int, key uint64, regular bool) netio.Status {
	ep, ok := s.c.Guard.Acquire()
	if !ok {
		return netio.Closed
	}
	defer s.c.Guard.Release()
	id := uint32(buf.ID())
	if !s.set.MarkPosted(id, s.holder, key) {
		return netio.InvalidArgument
	}
	var st netio.Status
	if regular {
		st = s.c.SendRegular(ep, id, size, size)
	} else {
		st = s.c.Send(ep, id, size, size)
	}
	if st != netio.OK {
		s.set.Unpost(id, s.holder)
		return st
	}
	return netio.OK
}

// postSend posts buffer key's first n bytes. It runs on the caller's
// goroutine, or on the poller goroutine for a queued send.
func (s *SendEndpointBuffered) postSend(ep *fabric.Endpoint, key uint32, n int) fabric.Errno {
	buf := s.pool.Lookup(uint64(key))
	if s.c.injectCounted() { // completions are selective (openCounted): ask for one
		return ep.SendCompletion(buf.Addr(), n, buf.Desc(), s.c.Owner.Context(key))
	}
	return ep.Send(buf.Addr(), n, buf.Desc(), s.c.Owner.Context(key))
}

// ReleaseBuffer gives back a leased buffer that was not sent and returns its
// key (the buffer ID). It reports InvalidArgument, changing nothing, for an
// unknown ID or a buffer not leased from this endpoint (already released,
// or in flight), and on a coalescing endpoint, whose buffers it holds.
func (s *SendEndpointBuffered) ReleaseBuffer(id uint64) (uint64, netio.Status) {
	if s.co != nil || id > math.MaxUint32 || !s.set.Release(uint32(id), s.holder) {
		return id, netio.InvalidArgument
	}
	return id, netio.OK
}

// NumAvailableBuffers returns the fewest free buffers seen since the
// previous call (netio3's get_num_available_buffers). With shared buffers
// it speaks for the shared pool.
func (s *SendEndpointBuffered) NumAvailableBuffers() int { return s.pool.NumAvailable() }

// FreeBuffers returns the send buffers free now (with shared buffers, the
// shared pool's). Unlike NumAvailableBuffers it starts no interval, so
// asking it changes nothing; a buffer is free before OnSendCompleted
// reports its send.
func (s *SendEndpointBuffered) FreeBuffers() int { return s.pool.Free() }

// PendingSends returns the keys of the sends in flight. It allocates; use it
// for diagnostics, not on the hot path.
func (s *SendEndpointBuffered) PendingSends() []uint64 {
	var keys []uint64
	for _, id := range s.set.Posted(nil, s.holder) {
		keys = append(keys, uint64(id))
	}
	return keys
}

// BufferSize returns the size of each send buffer: the largest message.
func (s *SendEndpointBuffered) BufferSize() int { return s.pool.BufferSize() }

// RemoteAddr returns the address the endpoint was dialled with.
func (s *SendEndpointBuffered) RemoteAddr() string { return s.c.addr }

// Stats returns the endpoint's counters.
func (s *SendEndpointBuffered) Stats() SendStats {
	st := s.replyStats(sendStats(s.c.Counters.Read()))
	st.InjectsUnconfirmed = s.c.InjectsUnconfirmed()
	return st
}

// Close ends the connection: the peer sees it closed, every pending key is
// reported with Canceled, every buffer goes back, and the endpoint's own
// poller stops. Buffers the caller leased and did not send are taken back
// too, and SendBuffer refuses them. With the endpoint's own buffers their
// memory stays mapped while the caller holds them, so a late write is
// harmless; buffers from sendbuf.Pooled go back to that pool once the
// caller releases them (ReleaseBuffer) or they are unreachable. Buffers
// from sendbuf.Shared go back to the shared pool at once, where another
// endpoint may take them: stop writing a leased buffer before Close. It is
// idempotent and may be called from a callback.
//
// A send reported OK has been taken by the provider, which is not always
// the peer: sockets completes sends once it has staged them, and Close
// discards what it still stages, so a receiver that is behind can miss
// messages reported OK (quirks.Quirks.CompletesWhenStaged; docs/performance.md
// says how many). Where every message counts, use tcp with
// DeliveryComplete, or have the receiver acknowledge. With Replies, a
// Close while replies still arrive resets the connection, and the kernel
// discards what it held of the sends reported OK (docs/providers.md):
// read the peer's last reply first, or use DeliveryComplete. With
// SendConfig.Inject, Close first waits (InjectLinger) until the provider
// has sent the injects it took, unless called from a callback; what it
// still holds then is counted in SendStats.InjectsUnconfirmed.
//
// On a coalescing endpoint Close first posts the current buffer, as Flush
// would but never as an inject, so that SendConfig.MaxInjectsHeld does not
// refuse it (it holds its buffer until it completes); like every send still pending it is then reported through
// OnSendCompleted, with OK or Canceled (a canceled send may or may not
// have reached the peer: Flush and wait for the completion first to know).
// Messages that cannot be posted (the transmit queue is full, the
// connection is gone, or a SendMessage raced with Close) are dropped,
// logged, and counted in CoalesceStats.Dropped; never lost silently.
func (s *SendEndpointBuffered) Close() error {
	s.flushOnClose()
	return s.c.close()
}

// bufferedKind is the send core's view of a SendEndpointBuffered: its
// methods are not the endpoint's, so users cannot call them.
type bufferedKind SendEndpointBuffered

// Claim returns a buffer in flight to the pool, once, and gives the key it
// was posted with (its ID, unless sendKeyed said otherwise).
func (k *bufferedKind) Claim(id uint32) (uint64, bool) { return k.set.Complete(id, k.holder) }

// Pending lists the buffers in flight.
func (k *bufferedKind) Pending(dst []uint32) []uint32 { return k.set.Posted(dst, k.holder) }

// HandleCompletion reports a send, or passes a reply to OnReply.
func (k *bufferedKind) HandleCompletion(key uint32, r poll.Result) {
	if isReverseKey(key) {
		(*SendEndpointBuffered)(k).onReply(key&^reverseKeyFlag, r)
		return
	}
	k.c.Complete(k, key, r)
}

// CancelPending ends coalescing first (a callback below finds it closed),
// then reports every buffer in flight.
func (k *bufferedKind) CancelPending(error) {
	(*SendEndpointBuffered)(k).endCoalescing()
	k.c.CancelAll(k)
}

func (k *bufferedKind) Progress() (bool, uint64) { return k.c.Counters.Progress() }

// FillStats adds the buffers and the coalescing counters.
func (k *bufferedKind) FillStats(e *stats.Endpoint) {
	e.Buffers = k.set.Len()
	e.FreeBuffers, e.MinFreeBuffers = k.set.ReadFree()
	if co := k.co; co != nil {
		e.CoalescedMessages, e.CoalescedBuffers, e.CoalesceDropped = co.Posted()
	}
	(*SendEndpointBuffered)(k).fillReplies(e)
}

// ReleaseResources gives the buffers back: a pool of its own is closed, a
// shared one keeps them.
func (k *bufferedKind) ReleaseResources() error {
	s := (*SendEndpointBuffered)(k)
	s.endCoalescing() // stops the flusher after a failed dial too
	return errors.Join(s.bufs.Close(s.holder), s.freeReplies())
}

// HandOffSize is the message size from which a send endpoint has its
// poller goroutine post a send instead of the goroutine that called
// SendBuffer (or the zero-copy Send): posting a large message from the
// application goroutine makes it wait inside a cgo call while the provider
// copies under its lock, and the Go runtime then moves that goroutine's
// processor to another thread. Below it, posting from the caller is faster
// than the hand-off's wake-up. docs/performance.md has the measurements.
const HandOffSize = 256 << 10 // sendcore.HandOffSize; a test keeps them equal
