package netns

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/testpattern"
)

// The roles a child process plays. The test binary re-executes itself
// inside a namespace with roleEnv naming the role and configEnv holding a
// JSON roleConfig; TestMain runs the role instead of the tests. A role
// reports on stdout, one JSON event a line, the last one its report.
const (
	roleEnv   = "NETIO_NETNS_ROLE"
	configEnv = "NETIO_NETNS_CONFIG"

	roleSender   = "sender"
	roleReceiver = "receiver"
	// roleResender sends through a ReconnectingSender, see runResender.
	roleResender = "resender"
)

// roleConfig configures a role.
type roleConfig struct {
	Provider string `json:"provider"`
	// Local is the host's address: the domain is opened on it and a
	// receiver listens on it.
	Local string `json:"local"`
	// Port is the receiver's port; empty lets the system choose. A
	// restarted receiver takes its predecessor's.
	Port string `json:"port,omitempty"`
	// Connect is the receiver's address, for a sender.
	Connect string `json:"connect,omitempty"`
	// Stream numbers a sender's messages, see msgPattern.
	Stream uint64 `json:"stream,omitempty"`
	// Count is how many messages a sender sends, unless the connection
	// ends first.
	Count uint64 `json:"count,omitempty"`
	// Size is the message size, and the receiver's buffer size.
	Size int `json:"size"`
	// Buffers is the sender's send buffer count or the receiver's posted
	// buffer count per connection.
	Buffers int `json:"buffers"`
	// ProgressAt, when not 0, has a sender report progress once this many
	// sends completed, and a receiver once a connection delivered this many
	// messages.
	ProgressAt uint64 `json:"progress_at,omitempty"`
	// Timeout bounds the role; when it runs out the role reports what it
	// has, with TimedOut set.
	Timeout time.Duration `json:"timeout"`

	// ProgressTimeout is a sender's SendConfig.ProgressTimeout.
	ProgressTimeout time.Duration `json:"progress_timeout,omitempty"`
	// Redial, when not 0, has a sender whose connection ended early report
	// that connection (a phase event), wait for a "redial" line on stdin,
	// then dial again and send Redial messages of stream Stream+1.
	Redial uint64 `json:"redial,omitempty"`

	// AnyStart lets each of a receiver's connections start at any
	// sequence number, taken from its first message: a reconnecting
	// sender resumes a stream where it broke off. The messages must
	// still follow each other without a gap on that connection.
	AnyStart bool `json:"any_start,omitempty"`
	// Record, when set, is a file in which a receiver counts every message
	// it delivers by sequence number (see deliveryRecord): it outlives a
	// SIGKILL, which a report does not.
	Record string `json:"record,omitempty"`

	// For the resender: SendConfig.DeliveryComplete, the
	// ReconnectConfig's Backlog and MaxBackoff, and the rate at which it
	// hands messages over, per second (0: as fast as Send takes them).
	DeliveryComplete bool          `json:"delivery_complete,omitempty"`
	Backlog          int           `json:"backlog,omitempty"`
	MaxBackoff       time.Duration `json:"max_backoff,omitempty"`
	Rate             int           `json:"rate,omitempty"`
}

// Event kinds, in the order a role may report them.
const (
	evListening = "listening" // receiver: Addr
	evConnected = "connected" // receiver, resender: Conn
	evProgress  = "progress"  // Count reached; receiver: Conn
	evClosed    = "closed"    // a connection ended: Error, PeerClosed, Timeout; receiver, resender: Conn
	evPhase     = "phase"     // Sender: a sender's first connection, before it redials
	evReport    = "report"    // Sender, Receiver or Resender; the last event
	evText      = "text"      // a stdout line that is not an event (parent side only)
)

// event is one line a role prints.
type event struct {
	Event      string          `json:"event"`
	Addr       string          `json:"addr,omitempty"`
	Conn       uint64          `json:"conn,omitempty"`
	Count      uint64          `json:"count,omitempty"`
	Error      string          `json:"error,omitempty"`
	PeerClosed bool            `json:"peer_closed,omitempty"`
	Timeout    bool            `json:"timeout,omitempty"` // Error matches netio.ErrTimeout
	Sender     *senderReport   `json:"sender,omitempty"`
	Receiver   *receiverReport `json:"receiver,omitempty"`
	Resender   *resenderReport `json:"resender,omitempty"`
}

// senderReport is what a sender saw. Every key handed to SendBuffer must
// come back exactly once: Sent = Completed + Failed, no unexpected key,
// none left unreported.
type senderReport struct {
	Sent       uint64 `json:"sent"`      // SendBuffer returned OK
	Completed  uint64 `json:"completed"` // reported OK
	Failed     uint64 `json:"failed"`    // reported with another status
	Canceled   uint64 `json:"canceled"`  // of Failed, reported Canceled
	Unexpected uint64 `json:"unexpected_keys"`
	Unreported uint64 `json:"unreported_keys"`
	// Stats is the endpoint's own count, taken after Close.
	Stats endpoint.SendStats `json:"stats"`
	// Closed is set when the connection ended before the sender closed it.
	Closed     bool   `json:"closed"`
	CloseError string `json:"close_error,omitempty"`
	PeerClosed bool   `json:"peer_closed"` // CloseError matches netio.ErrConnectionClosed
	// TimeoutClosed is set when CloseError matches netio.ErrTimeout: the
	// ProgressTimeout ended the connection.
	TimeoutClosed bool `json:"timeout_closed"`
	// Stall is how long no send had finished (completed, or failed by an
	// error completion) when the connection ended early: what the
	// ProgressTimeout waited.
	Stall time.Duration `json:"stall,omitempty"`
	// AvailableBuffers and PendingSends are the endpoint's free send
	// buffers and pending sends once every key was reported, before Close:
	// every buffer must be back.
	AvailableBuffers int `json:"available_buffers"`
	PendingSends     int `json:"pending_sends"`
	// Refused counts posts SendBuffer refused with Failed; the sender then
	// waits for the connection's end and stops.
	Refused uint64 `json:"refused"`
	// SendError is the first other unexpected outcome.
	SendError string `json:"send_error,omitempty"`
	TimedOut  bool   `json:"timed_out"`
}

// connReport is what a receiver saw on one connection.
type connReport struct {
	Conn     uint64 `json:"conn"`
	Stream   uint64 `json:"stream"`
	FirstSeq uint64 `json:"first_seq"` // of the first message

	Messages      uint64 `json:"messages"`
	Bytes         uint64 `json:"bytes"`
	VerifyErrors  uint64 `json:"verify_errors"`
	FirstError    string `json:"first_error,omitempty"`
	ReceiveErrors uint64 `json:"receive_errors"`
	ReceiveError  string `json:"receive_error,omitempty"` // the first
	Closed        bool   `json:"closed"`
	CloseError    string `json:"close_error,omitempty"`
	PeerClosed    bool   `json:"peer_closed"`
}

// receiverReport is what a receiver saw, one entry per connection in the
// order they were accepted.
type receiverReport struct {
	Accepted uint64       `json:"accepted"`
	Conns    []connReport `json:"conns"`
	TimedOut bool         `json:"timed_out"`
}

// runRole runs the role named by the environment and returns the exit
// status: 0 when it reported, 1 when it could not run, 2 when it was
// misconfigured.
func runRole(role string) int {
	var cfg roleConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: bad %s: %v\n", role, configEnv, err)
		return 2
	}
	var run func(context.Context, *domain.Manager, roleConfig, *emitter, zerolog.Logger) error
	switch role {
	case roleSender:
		run = runSender
	case roleReceiver:
		run = runReceiver
	case roleResender:
		run = runResender
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", role)
		return 2
	}
	out := newEmitter(os.Stdout)
	defer out.close()
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.WarnLevel).
		With().Timestamp().Str("role", role).Logger()
	if err := withDomain(cfg, log, func(ctx context.Context, mgr *domain.Manager) error {
		return run(ctx, mgr, cfg, out, log)
	}); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
		return 1
	}
	return 0
}

// withDomain runs fn with a context bounded by cfg.Timeout and a domain on
// the host's address, closed after fn.
func withDomain(cfg roleConfig, log zerolog.Logger, fn func(context.Context, *domain.Manager) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	mgr, err := domain.Open(domain.Config{Provider: cfg.Provider, Address: cfg.Local, Logger: log})
	if err != nil {
		return err
	}
	return errors.Join(fn(ctx, mgr), mgr.Close())
}

// emitter prints events from any goroutine, callbacks included: they only
// queue the event, so a slow reader of stdout never blocks a poller.
type emitter struct {
	events chan event
	done   chan struct{}
}

func newEmitter(w io.Writer) *emitter {
	e := &emitter{events: make(chan event, 1024), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		enc := json.NewEncoder(w)
		for ev := range e.events {
			if err := enc.Encode(ev); err != nil {
				fmt.Fprintf(os.Stderr, "writing event: %v\n", err)
			}
		}
	}()
	return e
}

func (e *emitter) emit(ev event) { e.events <- ev }

// close prints what is queued and stops.
func (e *emitter) close() {
	close(e.events)
	<-e.done
}

// sender is the sender role's state shared with the endpoint's callbacks.
type sender struct {
	cfg roleConfig
	out *emitter

	mu       sync.Mutex
	inFlight map[uint64]int // per key: handed to SendBuffer, less reported
	rep      senderReport

	sent       atomic.Uint64
	settled    atomic.Uint64 // keys reported, whatever the status
	freed      chan struct{} // a key was reported
	ended      chan struct{} // closed when the connection ended
	endOnce    sync.Once
	closing    atomic.Bool // the sender closes the endpoint itself
	progressed bool
	// lastProgress is when a send last finished other than canceled (a
	// completion or an error completion), closedAt when the connection
	// ended; both under mu.
	lastProgress, closedAt time.Time
}

// runSender streams cfg.Count messages to cfg.Connect and reports. With
// cfg.Redial it reports a connection that ended early as a phase, waits
// for the test to say "redial", and streams again on a new connection.
func runSender(ctx context.Context, mgr *domain.Manager, cfg roleConfig, out *emitter, log zerolog.Logger) error {
	rep, err := sendOnce(ctx, mgr, cfg, out, log)
	if rep == nil {
		return err
	}
	if err == nil && cfg.Redial > 0 && rep.Closed {
		phase := *rep // the emitter encodes it later, beside the TimedOut written below
		out.emit(event{Event: evPhase, Sender: &phase})
		select {
		case <-requested(os.Stdin, "redial"):
		case <-ctx.Done():
		}
		if ctx.Err() == nil {
			next := cfg
			next.Stream, next.Count, next.ProgressAt, next.Redial = cfg.Stream+1, cfg.Redial, 0, 0
			if rep, err = sendOnce(ctx, mgr, next, out, log); rep == nil {
				return err
			}
		}
		rep.TimedOut = ctx.Err() != nil
	}
	out.emit(event{Event: evReport, Sender: rep})
	return err
}

// sendOnce dials cfg.Connect, streams cfg.Count messages of cfg.Stream
// unless the connection ends first, waits until every key was reported,
// closes, and returns what it saw, with the close's error. When the dial
// fails it returns no report.
func sendOnce(ctx context.Context, mgr *domain.Manager, cfg roleConfig, out *emitter, log zerolog.Logger) (*senderReport, error) {
	s := &sender{cfg: cfg, out: out, inFlight: make(map[uint64]int),
		freed: make(chan struct{}, 1), ended: make(chan struct{})}
	ep, err := endpoint.Dial(ctx, mgr, cfg.Connect, endpoint.SendConfig{
		Params:             netio.BufferedSendParams{BufferSize: cfg.Size, BufferCount: cfg.Buffers},
		OnSendCompleted:    s.onCompleted,
		OnConnectionClosed: s.onClosed,
		ProgressTimeout:    cfg.ProgressTimeout,
		Runtime:            cq.Runtime{Logger: log},
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lastProgress = time.Now() // a stall with no completion at all counts from here
	s.mu.Unlock()
	s.stream(ctx, ep)
	s.waitSettled(ctx)
	// Every key is reported, so every buffer should be back. The first
	// call returns the fewest free since the endpoint started; the second
	// the fewest since then, which is now.
	ep.NumAvailableBuffers()
	available, pending := ep.NumAvailableBuffers(), len(ep.PendingSends())
	s.closing.Store(true)
	closeErr := ep.Close()

	s.mu.Lock()
	rep := s.rep
	for _, n := range s.inFlight {
		rep.Unreported += uint64(n)
	}
	if rep.Closed {
		rep.Stall = s.closedAt.Sub(s.lastProgress)
	}
	s.mu.Unlock()
	rep.AvailableBuffers, rep.PendingSends = available, pending
	rep.Sent = s.sent.Load()
	rep.Stats = ep.Stats()
	rep.TimedOut = ctx.Err() != nil
	return &rep, closeErr
}

// stream sends Count messages, or until the connection ends or time is up.
func (s *sender) stream(ctx context.Context, ep *endpoint.SendEndpointBuffered) {
	for seq := uint64(0); seq < s.cfg.Count && !s.done(ctx); {
		s.maybeProgress()
		buf := ep.GetBuffer()
		if buf == nil { // every buffer in flight: wait for a completion
			select {
			case <-s.freed:
			case <-s.ended:
			case <-ctx.Done():
			}
			continue
		}
		msgPattern.Fill(buf.Bytes()[:s.cfg.Size], s.cfg.Stream, seq)
		s.track(buf.ID(), true)
		st := ep.SendBuffer(buf, s.cfg.Size)
		for st == netio.NoResources && !s.done(ctx) { // transmit queue full
			time.Sleep(20 * time.Microsecond)
			st = ep.SendBuffer(buf, s.cfg.Size)
		}
		switch st {
		case netio.OK:
			s.sent.Add(1)
			seq++
		case netio.Closed, netio.NoResources: // the connection ended meanwhile
			s.track(buf.ID(), false)
		case netio.Failed:
			// The provider refused the post: the connection is breaking,
			// and its end is reported next. The endpoint takes the buffer
			// back when it ends.
			s.track(buf.ID(), false)
			s.mu.Lock()
			s.rep.Refused++
			s.mu.Unlock()
			s.awaitEnd(ctx)
			return
		default:
			s.track(buf.ID(), false)
			s.failed(fmt.Sprintf("send %d: %v", seq, st))
			return
		}
	}
}

// failed records the first unexpected outcome.
func (s *sender) failed(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rep.SendError == "" {
		s.rep.SendError = what
	}
}

// endWait bounds the wait for a connection's end after a refused post.
const endWait = 10 * time.Second

// awaitEnd waits until the connection has ended, at most endWait.
func (s *sender) awaitEnd(ctx context.Context) {
	timer := time.NewTimer(endWait)
	defer timer.Stop()
	select {
	case <-s.ended:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// done reports whether sending must stop.
func (s *sender) done(ctx context.Context) bool {
	select {
	case <-s.ended:
		return true
	default:
		return ctx.Err() != nil
	}
}

// maybeProgress reports progress once, when ProgressAt sends completed.
func (s *sender) maybeProgress() {
	if s.progressed || s.cfg.ProgressAt == 0 {
		return
	}
	s.mu.Lock()
	completed := s.rep.Completed
	s.mu.Unlock()
	if completed >= s.cfg.ProgressAt {
		s.progressed = true
		s.out.emit(event{Event: evProgress, Count: completed})
	}
}

// waitSettled waits until every key handed over was reported. After the
// connection ended they all must have been: the endpoint reports the
// pending ones before OnConnectionClosed.
func (s *sender) waitSettled(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.settled.Load() < s.sent.Load() {
		select {
		case <-s.ended:
			return
		case <-ctx.Done():
			return
		case <-s.freed:
		case <-tick.C: // a report that came between the load and the select
		}
	}
}

// track counts a key handed to SendBuffer, or takes the count back when
// the send was refused. It counts before the send: the completion may run
// before SendBuffer returns. A key is counted, not flagged: the buffer is
// back in the pool when its completion is reported, so the next send may
// take it before that report has run.
func (s *sender) track(key uint64, handedOver bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if handedOver {
		s.inFlight[key]++
	} else {
		s.forget(key)
	}
}

// forget takes one count of key back. Called with s.mu held.
func (s *sender) forget(key uint64) {
	if s.inFlight[key]--; s.inFlight[key] == 0 {
		delete(s.inFlight, key)
	}
}

// onCompleted runs on the poller goroutine.
func (s *sender) onCompleted(key uint64, st netio.Status) {
	if st != netio.Canceled { // canceled sends are the close, not progress
		s.mu.Lock()
		s.lastProgress = time.Now()
		s.mu.Unlock()
	}
	if s.count(key, st) {
		s.settled.Add(1)
	}
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// count books a report of key with st, and reports whether key was in
// flight.
func (s *sender) count(key uint64, st netio.Status) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[key] == 0 {
		s.rep.Unexpected++ // reported more often than handed over
		return false
	}
	s.forget(key)
	switch st {
	case netio.OK:
		s.rep.Completed++
	case netio.Canceled:
		s.rep.Canceled++
		fallthrough
	default:
		s.rep.Failed++
	}
	return true
}

// onClosed runs on the poller goroutine, once.
func (s *sender) onClosed(err error) {
	peer, timeout := errors.Is(err, netio.ErrConnectionClosed), errors.Is(err, netio.ErrTimeout)
	if !s.closing.Load() {
		s.mu.Lock()
		s.rep.Closed, s.rep.CloseError, s.rep.PeerClosed = true, err.Error(), peer
		s.rep.TimeoutClosed, s.closedAt = timeout, time.Now()
		s.mu.Unlock()
		s.out.emit(event{Event: evClosed, Error: err.Error(), PeerClosed: peer, Timeout: timeout})
	}
	s.endOnce.Do(func() { close(s.ended) })
}

// receiver is the receiver role's state shared with the listener's
// callbacks, which all run on the listener's poller goroutine.
type receiver struct {
	cfg roleConfig
	out *emitter

	mu     sync.Mutex
	conns  map[uint64]*connState
	order  []uint64        // connection IDs in the order accepted
	record *deliveryRecord // nil without cfg.Record
}

// connState is one connection's progress.
type connState struct {
	rep   connReport
	check testpattern.Checker // of the connection's stream, due message and size
}

// runReceiver listens on cfg.Local until stdin says finish (or ends), then
// reports.
func runReceiver(ctx context.Context, mgr *domain.Manager, cfg roleConfig, out *emitter, log zerolog.Logger) (err error) {
	r := &receiver{cfg: cfg, out: out, conns: make(map[uint64]*connState)}
	if cfg.Record != "" {
		if r.record, err = openRecord(cfg.Record); err != nil {
			return err
		}
		// After the listener's close: no callback writes to it any more.
		defer func() { err = errors.Join(err, r.record.close()) }()
	}
	port := cfg.Port
	if port == "" {
		port = "0"
	}
	l, err := endpoint.Listen(mgr, net.JoinHostPort(cfg.Local, port), endpoint.ListenConfig{
		Params:                  netio.ReceiveParams{BufferSize: cfg.Size, BufferCount: cfg.Buffers},
		OnData:                  r.onData,
		OnConnectionEstablished: r.onEstablished,
		OnConnectionClosed:      r.onClosed,
		OnReceiveError:          r.onReceiveError,
		Runtime:                 cq.Runtime{Logger: log},
	})
	if err != nil {
		return err
	}
	out.emit(event{Event: evListening, Addr: l.Addr()})

	select {
	case <-requested(os.Stdin, "finish"):
	case <-ctx.Done():
	}
	closeErr := l.Close()
	rep := r.report(l.Accepted())
	rep.TimedOut = ctx.Err() != nil
	out.emit(event{Event: evReport, Receiver: &rep})
	return closeErr
}

// requested is closed when control has a line saying word, or ends (the
// test is gone, and Pdeathsig ends the role soon anyway).
func requested(control io.Reader, word string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(control)
		for sc.Scan() && strings.TrimSpace(sc.Text()) != word {
		}
	}()
	return done
}

func (r *receiver) report(accepted uint64) receiverReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := receiverReport{Accepted: accepted}
	for _, id := range r.order {
		rep.Conns = append(rep.Conns, r.conns[id].rep)
	}
	return rep
}

// conn returns the state of ep's connection, creating it on first use.
func (r *receiver) conn(ep *endpoint.ReceiveEndpoint) *connState {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.conns[ep.ID()]
	if !ok {
		c = &connState{rep: connReport{Conn: ep.ID()}, check: testpattern.Checker{Pattern: msgPattern, Len: r.cfg.Size}}
		r.conns[ep.ID()] = c
		r.order = append(r.order, ep.ID())
	}
	return c
}

func (r *receiver) onEstablished(ep *endpoint.ReceiveEndpoint) {
	r.conn(ep)
	r.out.emit(event{Event: evConnected, Conn: ep.ID()})
}

// onData checks that the message is the next of its connection's stream.
// The stream number is taken from the connection's first message, and with
// AnyStart the first sequence number too.
func (r *receiver) onData(ep *endpoint.ReceiveEndpoint, data []byte) {
	c := r.conn(ep)
	r.mu.Lock()
	defer r.mu.Unlock()
	h, headed := testpattern.ParseHeader(data)
	seq := h.Seq
	if c.rep.Messages == 0 && headed {
		c.rep.Stream, c.check.Stream = h.Stream, h.Stream
		if r.cfg.AnyStart {
			c.check.Next = seq
		}
		c.rep.FirstSeq = seq
	}
	// Recorded before anything else: a SIGKILL between the provider taking
	// a message and this line loses the message unrecorded.
	var recErr error
	if r.record != nil && headed && !r.record.count(seq) {
		recErr = fmt.Errorf("message %d beyond the delivery record's %d", seq, recordSize)
	}
	err := c.check.Check(data) // moves on to the next message, matched or not
	if err != nil && r.record != nil {
		r.record.bad(seq)
	}
	if err = errors.Join(recErr, err); err != nil {
		c.rep.VerifyErrors++
		if c.rep.FirstError == "" {
			c.rep.FirstError = err.Error()
		}
	}
	c.rep.Messages++
	c.rep.Bytes += uint64(len(data))
	if c.rep.Messages == r.cfg.ProgressAt {
		r.out.emit(event{Event: evProgress, Conn: ep.ID(), Count: c.rep.Messages})
	}
}

func (r *receiver) onReceiveError(ep *endpoint.ReceiveEndpoint, err error) {
	c := r.conn(ep)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.rep.ReceiveErrors++; c.rep.ReceiveError == "" {
		c.rep.ReceiveError = err.Error()
	}
}

func (r *receiver) onClosed(ep *endpoint.ReceiveEndpoint, err error) {
	c := r.conn(ep)
	peer := errors.Is(err, netio.ErrConnectionClosed)
	r.mu.Lock()
	c.rep.Closed, c.rep.CloseError, c.rep.PeerClosed = true, err.Error(), peer
	r.mu.Unlock()
	r.out.emit(event{Event: evClosed, Conn: ep.ID(), Error: err.Error(), PeerClosed: peer,
		Timeout: errors.Is(err, netio.ErrTimeout)})
}
