package pubsub

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/endpoint"
)

// pubSession is one subscriber as the publisher sees it: its control
// connection, served by one goroutine, and, after hello, the data
// connection the publisher dialled to it.
type pubSession struct {
	p    *Publisher
	id   uint64
	conn net.Conn

	// Set at hello, before any subscription exists, and not changed after.
	peer   string
	policy Policy
	ep     *endpoint.SendEndpointBuffered // Buffered and Immediate modes
	zep    *endpoint.SendEndpointZeroCopy // ZeroCopy mode

	subsMu sync.Mutex // guards subs for Subscribers; only serve changes it
	subs   map[uint64]*subscription
	// ended counts the copies delivered over the subscriptions that ended
	// (guarded by subsMu), so that Subscribers reports them while the
	// session is still listed.
	ended uint64

	// mu orders the deliveries to a Block subscriber and guards its pending
	// slot: the one message (and the SYNC record before it, if any) that
	// its connection had no room for.
	mu         sync.Mutex
	pending    atomic.Bool
	pendSync   RecordKind // the record before the message, 0 for none
	pendTag    uint64
	pendSeq    uint64
	pendStatus uint8
	pendData   []byte // Buffered and Immediate: a copy
	pendZC     []byte // ZeroCopy: the caller's data
	pendIdx    uint32 // ZeroCopy: its publish

	// Shared mode (shared.go): the posts a Block session had no room for,
	// in order (guarded by mu); the posts made to the session; the START
	// records owed to it (guarded by startMu, counted in nStarts); the
	// copies delivered; and the shared buffers its sends hold in flight.
	shq         []queuedPost
	posts       atomic.Uint64
	startMu     sync.Mutex
	starts      []startRec
	nStarts     atomic.Int32
	shDelivered atomic.Uint64
	shHeld      atomic.Int32

	dropped atomic.Uint64

	// WaitRoom (room.go): refused is set when ss made Publish answer
	// NoResources, and cleared when it has roomLow sends' room again (set
	// at hello: half of what it holds in flight) or its refusal no longer
	// applies.
	refused refusal
	roomLow int
}

// acceptLoop takes control connections until Close.
func (p *Publisher) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.isClosed.Load() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			p.log.Warn().Err(err).Msg("pubsub: accept failed")
			select {
			case <-p.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		if len(p.sessions) >= p.cfg.MaxSubscribers {
			p.mu.Unlock()
			p.refusedSessions.Add(1)
			p.wg.Add(1)
			go func() { // answer without holding up the accept loop
				defer p.wg.Done()
				writeLine(c, Response{V: ProtocolVersion, Op: OpError, Error: "too many subscribers"})
				c.Close()
			}()
			continue
		}
		p.nextID++
		ss := &pubSession{p: p, id: p.nextID, conn: c, subs: map[uint64]*subscription{}}
		p.sessions[ss.id] = ss
		p.wg.Add(1)
		p.mu.Unlock()
		p.sessionsTotal.Add(1)
		go ss.serve()
	}
}

// errLineTooLong reports a control line over MaxLineBytes.
var errLineTooLong = fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLineBytes)

// readLine reads one LF-terminated line of at most MaxLineBytes. The slice
// is valid until the next call. A line is refused as soon as MaxLineBytes
// of it arrived without its LF, without waiting for more: a peer that
// sent a line past the limit may wait for the answer.
func readLine(r *bufio.Reader, buf []byte) ([]byte, []byte, error) {
	buf = buf[:0]
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLineBytes {
			return nil, buf, errLineTooLong
		}
		switch {
		case err == nil && len(buf) == 0:
			return chunk, buf, nil
		case err == nil:
			buf = append(buf, chunk...)
			return buf, buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if buf = append(buf, chunk...); len(buf) >= MaxLineBytes {
				return nil, buf, errLineTooLong // its LF would be past the limit
			}
		default:
			if len(buf)+len(chunk) > 0 && errors.Is(err, io.EOF) {
				return nil, buf, io.ErrUnexpectedEOF
			}
			return nil, buf, err
		}
	}
}

// writeLine writes one answer, bounded in time.
func writeLine(c net.Conn, r Response) error {
	_ = c.SetWriteDeadline(time.Now().Add(controlWriteTimeout))
	_, err := c.Write(appendLine(nil, r))
	return err
}

// serve reads the subscriber's requests until its connection ends, then
// ends its subscriptions.
func (ss *pubSession) serve() {
	p := ss.p
	defer p.wg.Done()
	defer ss.end()
	r := bufio.NewReaderSize(ss.conn, 64<<10)
	var buf []byte
	_ = ss.conn.SetReadDeadline(time.Now().Add(p.cfg.HelloTimeout))
	for {
		var line []byte
		var err error
		line, buf, err = readLine(r, buf)
		if err != nil {
			if errors.Is(err, ErrMalformed) {
				p.malformed.Add(1)
				ss.refuse(0, err)
			} else if ss.peer == "" && !p.isClosed.Load() {
				p.log.Debug().Err(err).Str("from", ss.conn.RemoteAddr().String()).Msg("pubsub: control connection ended before hello")
			}
			return
		}
		req, err := ParseRequest(line)
		if err != nil {
			p.malformed.Add(1)
			ss.refuse(req.ID, err)
			return
		}
		p.requests.Add(1)
		var resp Response
		switch req.Op {
		case OpHello:
			if ss.peer != "" {
				ss.refuse(req.ID, errors.New("second hello"))
				return
			}
			if resp, err = ss.hello(req); err != nil {
				ss.refuse(req.ID, err)
				return
			}
			_ = ss.conn.SetReadDeadline(time.Time{})
		case OpSubscribe, OpUnsubscribe:
			if ss.peer == "" {
				ss.refuse(req.ID, fmt.Errorf("%s before hello", req.Op))
				return
			}
			if req.Op == OpSubscribe {
				resp = ss.subscribe(req)
			} else {
				resp = ss.unsubscribe(req)
			}
		}
		resp.V, resp.Op, resp.ID = ProtocolVersion, OpAck, req.ID
		if err := writeLine(ss.conn, resp); err != nil {
			return
		}
	}
}

// refuse answers a request with an error; the caller then closes the
// connection.
func (ss *pubSession) refuse(id uint64, err error) {
	if !errors.Is(err, ErrMalformed) {
		ss.p.refusedRequests.Add(1)
	}
	ss.p.log.Warn().Err(err).Str("from", ss.conn.RemoteAddr().String()).Msg("pubsub: control request refused")
	_ = writeLine(ss.conn, Response{V: ProtocolVersion, Op: OpError, ID: id, Error: err.Error()})
}

// hello checks the subscriber's data address and buffers, dials it, and
// opens the data connection with a HELLO record.
func (ss *pubSession) hello(req Request) (Response, error) {
	p := ss.p
	ip, _, _ := splitDataAddr(req.Data) // checked by ParseRequest
	if !p.cfg.AllowForeignDataHost {
		from, _, err := net.SplitHostPort(ss.conn.RemoteAddr().String())
		if err != nil || !ip.Equal(net.ParseIP(from)) {
			return Response{}, fmt.Errorf("data address %s is not on the control connection's host %s", req.Data, from)
		}
	}
	if req.BufferSize < p.cfg.Send.BufferSize {
		return Response{}, fmt.Errorf("receive buffers of %d bytes cannot hold the publisher's %d-byte buffers", req.BufferSize, p.cfg.Send.BufferSize)
	}
	policy := parsePolicy(req.Policy)
	if p.cfg.PolicyFor != nil {
		policy = p.cfg.PolicyFor(req.Data, policy)
	}
	if policy != Block && policy != Drop {
		policy = p.cfg.Policy
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.DialTimeout)
	defer cancel()
	rt := cq.Runtime{Poller: p.poller, Logger: p.log}
	onClosed := func(err error) { ss.onDataClosed(req.Data, err) }
	if p.cfg.Mode == ZeroCopy || p.cfg.Mode == Shared {
		zcfg := endpoint.ZeroCopyConfig{
			HeaderSize:         zcHeaderMax,
			HeaderCount:        p.cfg.MaxInFlight,
			SharedRegion:       p.cfg.ZeroCopyRegion,
			Cache:              p.cache,
			OnSendCompleted:    ss.onZCSendCompleted,
			OnConnectionClosed: onClosed,
			Runtime:            rt,
		}
		if p.sh != nil { // the shared buffers, at most BufferCount in flight
			zcfg.HeaderSize, zcfg.HeaderCount = sharedHeaderMax, p.cfg.Send.BufferCount
			zcfg.SharedRegion = p.sh.region
		}
		zep, err := endpoint.DialZeroCopy(ctx, p.mgr, req.Data, zcfg)
		if err != nil {
			return Response{}, fmt.Errorf("dial %s: %w", req.Data, err)
		}
		ss.mu.Lock()
		ss.zep, ss.peer, ss.policy, ss.roomLow = zep, req.Data, policy, zcfg.HeaderCount/2
		ss.mu.Unlock()
		var hdr [zcHeaderMax]byte
		binary.LittleEndian.PutUint32(hdr[:], wordTag|RecordLen)
		binary.LittleEndian.PutUint64(hdr[4:], ControlTag)
		putRecord((*[RecordLen]byte)(hdr[12:]), RecordHello, req.Token, p.instance)
		if st := zep.Send(hdr[:syncMessageLen], nil, zcNoKey); st != netio.OK {
			return Response{}, fmt.Errorf("HELLO record: %v", st)
		}
		return Response{Instance: p.instance, Policy: policy.String(), Numbering: p.cfg.Numbering}, nil
	}
	ep, err := endpoint.Dial(ctx, p.mgr, req.Data, endpoint.SendConfig{
		Params:             p.cfg.Send,
		Coalesce:           &endpoint.CoalesceConfig{FlushInterval: p.cfg.FlushInterval},
		OnSendCompleted:    ss.onSendCompleted,
		OnConnectionClosed: onClosed,
		Runtime:            rt,
	})
	if err != nil {
		return Response{}, fmt.Errorf("dial %s: %w", req.Data, err)
	}
	ss.mu.Lock()
	ss.ep, ss.peer, ss.policy, ss.roomLow = ep, req.Data, policy, p.cfg.Send.BufferCount/2
	if policy == Block { // the pending slot, for the one message that did not fit
		ss.pendData = make([]byte, 0, p.maxPayload)
	}
	ss.mu.Unlock()
	var rec [RecordLen]byte
	putRecord(&rec, RecordHello, req.Token, p.instance)
	if st := ep.SendMessageStatus(ControlTag, 0, rec[:]); st != netio.OK {
		return Response{}, fmt.Errorf("HELLO record: %v", st)
	}
	if st := ep.Flush(); st != netio.OK && st != netio.NoResources {
		return Response{}, fmt.Errorf("HELLO record: %v", st)
	}
	return Response{Instance: p.instance, Policy: policy.String(), Numbering: p.cfg.Numbering}, nil
}

// subscribe adds the subscriptions a request asks for and answers with
// the tags done and those not served.
func (ss *pubSession) subscribe(req Request) Response {
	p := ss.p
	tags := *p.tags.Load()
	var resp Response
	var added []uint64
	for _, t := range req.Tags {
		ts := tags[t]
		if ts == nil {
			p.refusedTags.Add(1)
			resp.Refused = append(resp.Refused, t)
			continue
		}
		resp.Tags = append(resp.Tags, t)
		ss.subsMu.Lock()
		old := ss.subs[t]
		ss.subsMu.Unlock()
		if old != nil {
			ts.mu.Lock()
			resp.Next = append(resp.Next, old.start)
			ts.mu.Unlock()
			continue
		}
		s := &subscription{sess: ss, needSync: p.sh == nil, fresh: p.sh == nil}
		ts.mu.Lock()
		s.start = ts.seq
		resp.Next = append(resp.Next, s.start)
		i, _ := searchSession(ts.subs, ss.id)
		ts.subs = insertAt(ts.subs, i, s)
		if p.sh != nil { // shared buffers carry their SYNC records
			p.regroup(ts)
			ss.oweStart(t, s.start)
		} else {
			ts.unsynced.Add(1)
		}
		ts.mu.Unlock()
		ss.subsMu.Lock()
		ss.subs[t] = s
		ss.subsMu.Unlock()
		added = append(added, t)
	}
	if p.cfg.OnSubscribe != nil {
		for _, t := range added {
			p.cfg.OnSubscribe(t, ss.peer)
		}
	}
	return resp
}

// unsubscribe ends the subscriptions a request names; tags not subscribed
// are done already.
func (ss *pubSession) unsubscribe(req Request) Response {
	for _, t := range req.Tags {
		ss.remove(t)
	}
	return Response{Tags: req.Tags}
}

// remove ends the subscription to t, if any, and reports it.
func (ss *pubSession) remove(t uint64) {
	ss.subsMu.Lock()
	s := ss.subs[t]
	delete(ss.subs, t)
	if s == nil {
		ss.subsMu.Unlock()
		return
	}
	if ts := (*ss.p.tags.Load())[t]; ts != nil {
		ts.mu.Lock()
		if i := indexOf(ts.subs, s); i >= 0 {
			ts.subs = append(ts.subs[:i:i], ts.subs[i+1:]...)
		}
		if ss.p.sh != nil {
			ss.p.regroup(ts)
		}
		if s.needSync {
			ts.unsynced.Add(-1)
		}
		ss.ended += s.delivered // final: Publish no longer sees s
		ts.mu.Unlock()
	}
	ss.subsMu.Unlock()
	ss.letGo() // its refusal may have been for t
	if cb := ss.p.cfg.OnUnsubscribe; cb != nil {
		cb(t, ss.peer)
	}
}

// end runs when the control connection ended: every subscription ends,
// then the data connection.
func (ss *pubSession) end() {
	ss.subsMu.Lock()
	tags := make([]uint64, 0, len(ss.subs))
	for t := range ss.subs {
		tags = append(tags, t)
	}
	ss.subsMu.Unlock()
	for _, t := range tags {
		ss.remove(t)
	}
	ss.conn.Close()
	ss.mu.Lock()
	ep, zep := ss.ep, ss.zep
	lostZC := false
	if ss.pending.Load() {
		ss.pending.Store(false)
		lost := 1
		if ss.p.sh != nil { // Shared mode counts buffers
			lost = ss.dropQueued()
		}
		ss.p.lostPending.Add(uint64(lost))
		ss.p.log.Warn().Str("peer", ss.peer).Msg("pubsub: a message waiting for a Block subscriber is lost: its connection ended")
		lostZC, ss.pendZC = zep != nil && ss.p.sh == nil, nil
	}
	idx := ss.pendIdx
	ss.mu.Unlock()
	ss.letGo()
	if lostZC { // after the unlock: OnPublishCompleted may publish again
		ss.p.zcComplete(idx, netio.Failed)
	}
	var err error
	switch {
	case ep != nil:
		err = ep.Close()
	case zep != nil:
		err = zep.Close() // reports every send in flight: its publish completes
	}
	if err != nil {
		ss.p.log.Warn().Err(err).Str("peer", ss.peer).Msg("pubsub: closing a data connection")
	}
	ss.p.mu.Lock()
	delete(ss.p.sessions, ss.id)
	ss.p.mu.Unlock()
}

// onDataClosed runs on the poller when the data connection ends: the
// subscriber is gone (or the publisher closes), so its control
// connection is closed too, which ends the session.
func (ss *pubSession) onDataClosed(peer string, err error) {
	if !errors.Is(err, netio.ErrClosed) {
		ss.p.log.Info().Err(err).Str("peer", peer).Msg("pubsub: data connection ended")
	}
	ss.conn.Close()
}

// onSendCompleted runs on the poller after each buffer sent: a buffer is
// free, so a pending message may go now, and a WaitRoom caller may be
// owed a wake.
func (ss *pubSession) onSendCompleted(uint64, netio.Status) {
	if ss.pending.Load() {
		ss.mu.Lock()
		ss.drainLocked()
		ss.mu.Unlock()
	}
	ss.noteRoom()
}

// onZCSendCompleted runs on the poller after each zero-copy send: it
// completes the send's publish, and a header slot is free, so a pending
// message may go now.
func (ss *pubSession) onZCSendCompleted(key uint64, st netio.Status) {
	switch {
	case key == zcNoKey:
	case key&sharedKeyBit != 0:
		ss.shHeld.Add(-1)
		ss.p.sh.release(uint32(key &^ sharedKeyBit))
	default:
		ss.p.zcComplete(uint32(key), st)
	}
	ss.onSendCompleted(key, st)
}

// setPendingLocked keeps the message (and its SYNC record of kind kind,
// if not 0) that a Block subscriber's connection had no room for, and
// tries once more at once, in case a buffer came back in between. ss.mu
// is held; the slot is empty (Publish checked).
func (ss *pubSession) setPendingLocked(kind RecordKind, tag, seq uint64, status uint8, parts [][]byte) {
	ss.pendSync, ss.pendTag, ss.pendSeq, ss.pendStatus = kind, tag, seq, status
	ss.pendData = ss.pendData[:0]
	for _, b := range parts {
		ss.pendData = append(ss.pendData, b...)
	}
	ss.pending.Store(true)
	ss.drainLocked()
}

// drainLocked sends the pending message, if any, and reports whether the
// slot is empty now. A connection that is ending empties it (the loss is
// the connection's, and its subscriber sees a gap). ss.mu is held.
func (ss *pubSession) drainLocked() bool {
	if !ss.pending.Load() {
		return true
	}
	if ss.p.sh != nil {
		return ss.drainSharedLocked()
	}
	if ss.zep != nil {
		return ss.drainZCLocked()
	}
	for ss.pendSync != 0 {
		var rec [RecordLen]byte
		putRecord(&rec, ss.pendSync, ss.pendTag, ss.pendSeq)
		switch ss.ep.SendMessageStatus(ControlTag, 0, rec[:]) {
		case netio.NoResources:
			return false
		case netio.OK:
			ss.pendSync = nextRecord(ss.pendSync, 0)
		default:
			ss.pending.Store(false)
			ss.p.lostPending.Add(1)
			return true
		}
	}
	switch ss.ep.SendMessageStatus(ss.pendTag, ss.pendStatus, ss.pendData) {
	case netio.NoResources:
		return false
	case netio.OK:
		if ss.p.cfg.Mode == Immediate {
			ss.ep.Flush()
		}
	default:
		ss.p.lostPending.Add(1)
	}
	ss.pending.Store(false)
	return true
}

// searchSession finds where a subscription of session id goes
// in subs, sorted by session ID.
func searchSession(subs []*subscription, id uint64) (int, bool) {
	lo, hi := 0, len(subs)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case subs[m].sess.id < id:
			lo = m + 1
		case subs[m].sess.id > id:
			hi = m
		default:
			return m, true
		}
	}
	return lo, false
}

// insertAt returns subs with s inserted at i, in a new array: Publish may
// still hold the old slice header under the same lock, so the old array
// is never written.
func insertAt(subs []*subscription, i int, s *subscription) []*subscription {
	out := make([]*subscription, 0, len(subs)+1)
	out = append(out, subs[:i]...)
	out = append(out, s)
	return append(out, subs[i:]...)
}

// indexOf returns the index of s in subs, or -1.
func indexOf(subs []*subscription, s *subscription) int {
	for i, x := range subs {
		if x == s {
			return i
		}
	}
	return -1
}
