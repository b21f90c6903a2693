package pubsub

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// The reverse path (FELIX's "send to" a front-end): a Receiver announces
// on a bus the tags it takes messages for, and a Sender sends a message of
// a tag to whoever receives for it, looking the tag up on the bus and
// keeping one reconnecting connection per receiver. Each message is one
// libfabric message holding one message in the coalesced format, so any
// coalesced reader can be a receiver. Receivers and publishers should use
// different groups of a Directory: a subscriber that looked a tag up would
// otherwise take a receiver for a publisher. A Sender keeps the connection
// to a receiver that moved away (redialling it with backoff, in case it
// comes back) until Close; the messages go to the address the bus names at
// each SendTo.

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	// Tags are the tags it receives messages for, announced on Bus.
	Tags []uint64
	// Bus is where the receiver announces itself; nil announces nothing
	// (senders then need a Bus naming it, such as Fixed).
	Bus Bus
	// BusID names the receiver on the bus; empty derives one from the host,
	// process and port.
	BusID string
	// Receive sets each sender connection's receive buffers; defaults
	// apply. BufferSize must hold the senders' buffers.
	Receive netio.ReceiveParams
	// OnMessage is called for every message of one of Tags (Seq is 0:
	// commands are not numbered; Publisher is empty). It runs on the
	// receiver's poller goroutine and must not block. Required.
	OnMessage func(m Message)
	// Runtime names the poller and the logger.
	cq.Runtime
}

// Receiver takes messages sent to its tags with Sender.SendTo.
type Receiver struct {
	cfg         ReceiverConfig
	ln          *endpoint.Listener
	busID       string
	tags        map[uint64]bool
	unsolicited atomic.Uint64
	stop        chan struct{}
	wg          sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error
}

// NewReceiver starts a receiver listening on addr ("IP:PORT"; port 0
// picks one) in mgr's domain, and announces it on its bus.
func NewReceiver(mgr *domain.Manager, addr string, cfg ReceiverConfig) (*Receiver, error) {
	if cfg.OnMessage == nil {
		return nil, fmt.Errorf("%w: pubsub: ReceiverConfig.OnMessage is required", netio.ErrInvalidArgument)
	}
	r := &Receiver{cfg: cfg, tags: map[uint64]bool{}, stop: make(chan struct{})}
	for _, t := range cfg.Tags {
		r.tags[t] = true
	}
	ln, err := endpoint.Listen(mgr, addr, endpoint.ListenConfig{
		Params: cfg.Receive,
		OnMessage: func(_ *endpoint.ReceiveEndpoint, tag uint64, data []byte, status uint8) {
			if !r.tags[tag] {
				r.unsolicited.Add(1)
				return
			}
			cfg.OnMessage(Message{Tag: tag, Data: data, Status: status})
		},
		Runtime: cfg.Runtime,
	})
	if err != nil {
		return nil, fmt.Errorf("pubsub: receiver: %w", err)
	}
	r.ln = ln
	if cfg.Bus != nil {
		if r.busID = cfg.BusID; r.busID == "" {
			r.busID = defaultBusID(ln.Addr())
		}
		if err := cfg.Bus.Announce(r.busID, ln.Addr(), cfg.Tags); err != nil {
			ln.Close()
			return nil, fmt.Errorf("pubsub: bus: %w", err)
		}
		r.wg.Add(1)
		go r.refresh()
	}
	return r, nil
}

// refresh repeats the announcement as the bus asks.
func (r *Receiver) refresh() {
	defer r.wg.Done()
	t := time.NewTicker(busRefresh(r.cfg.Bus))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.cfg.Bus.Announce(r.busID, r.ln.Addr(), r.cfg.Tags); err != nil {
				r.cfg.Logger.Warn().Err(err).Msg("pubsub: bus refresh failed")
			}
		}
	}
}

// Addr returns the address senders connect to.
func (r *Receiver) Addr() string { return r.ln.Addr() }

// ReceiverStats counts what a receiver got.
type ReceiverStats struct {
	Messages    uint64 // messages decoded (of its tags or not)
	Unsolicited uint64 // messages of tags it does not receive for, dropped
	Malformed   uint64 // buffers that broke the coalesced format
}

// Stats returns the receiver's counters.
func (r *Receiver) Stats() ReceiverStats {
	st := r.ln.Stats().Received
	return ReceiverStats{Messages: st.CoalescedMessages, Unsolicited: r.unsolicited.Load(), Malformed: st.MalformedBuffers}
}

// Close withdraws the receiver from its bus and closes its connections.
// It is idempotent; it must not be called from a callback.
func (r *Receiver) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.wg.Wait()
		var err error
		if r.cfg.Bus != nil {
			err = r.cfg.Bus.Withdraw(r.busID)
		}
		r.closeErr = errors.Join(err, r.ln.Close())
	})
	return r.closeErr
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	// Bus finds the receiver of each tag. Required.
	Bus Bus
	// Send sets each receiver connection's buffers; defaults apply. A
	// message must fit in one buffer with 12 bytes of framing.
	Send netio.BufferedSendParams
	// Backlog is how many messages per receiver may wait while it is
	// unreachable; 0 selects Send.BufferCount.
	Backlog int
	// InitialBackoff and MaxBackoff pace the redials of a receiver; 0
	// selects the endpoint package's defaults.
	InitialBackoff, MaxBackoff time.Duration
	// OnSendCompleted is called once for every message SendTo took, with
	// the receiver's address and the key SendTo returned: OK, Failed (in
	// flight when a connection broke; not sent again) or Canceled (still
	// waiting at Close). It runs on a poller goroutine (or the goroutine
	// calling Close) and must not block. May be nil.
	OnSendCompleted func(receiver string, key uint64, st netio.Status)
	// Runtime names the poller and the logger of the connections.
	cq.Runtime
}

// Sender sends messages to whoever receives for their tag (SendTo), over
// one reconnecting connection per receiver.
type Sender struct {
	mgr     *domain.Manager
	cfg     SenderConfig
	max     int
	mu      sync.Mutex
	senders map[string]*endpoint.ReconnectingSender
	enc     coalesce.Encoder
	scratch []byte
	closed  bool
}

// NewSender returns a Sender; it connects to receivers as SendTo needs
// them.
func NewSender(mgr *domain.Manager, cfg SenderConfig) (*Sender, error) {
	if mgr == nil || cfg.Bus == nil {
		return nil, fmt.Errorf("%w: pubsub: NewSender needs a domain and a Bus", netio.ErrInvalidArgument)
	}
	cfg.Send = cfg.Send.WithDefaults()
	if err := cfg.Send.Validate(); err != nil {
		return nil, fmt.Errorf("pubsub: Send: %w", err)
	}
	return &Sender{mgr: mgr, cfg: cfg, max: cfg.Send.BufferSize - coalesce.Overhead(1, true),
		senders: map[string]*endpoint.ReconnectingSender{}, scratch: make([]byte, cfg.Send.BufferSize)}, nil
}

// SendTo sends data as one message of tag to the receiver the bus names
// for tag, and returns the key OnSendCompleted will report. It answers
// NoSubscriptions when no receiver serves tag, NoResources when that
// receiver's backlog is full (retry later), InvalidArgument for a message
// too large, Closed after Close, Failed when the receiver's address cannot
// be dialled at all. The message is copied; while the receiver is
// unreachable it waits in the backlog and goes out after the reconnection.
// It does not block on the network.
func (s *Sender) SendTo(tag uint64, data []byte) (uint64, Status) {
	if len(data) > s.max {
		return 0, InvalidArgument
	}
	addr, err := s.cfg.Bus.Lookup(tag)
	if err != nil {
		return 0, NoSubscriptions
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, Closed
	}
	rs := s.senders[addr]
	if rs == nil {
		cb := s.cfg.OnSendCompleted
		rs, err = endpoint.DialReconnecting(s.mgr, addr, endpoint.ReconnectConfig{
			Send:           endpoint.SendConfig{Params: s.cfg.Send, Runtime: s.cfg.Runtime},
			Backlog:        s.cfg.Backlog,
			InitialBackoff: s.cfg.InitialBackoff,
			MaxBackoff:     s.cfg.MaxBackoff,
			OnSendCompleted: func(key uint64, st netio.Status) {
				if cb != nil {
					cb(addr, key, st)
				}
			},
		})
		if err != nil {
			s.cfg.Logger.Warn().Err(err).Str("receiver", addr).Msg("pubsub: cannot send to the receiver")
			return 0, Failed
		}
		s.senders[addr] = rs
	}
	s.enc.Reset(s.scratch)
	if s.enc.Append(tag, 0, data) != nil {
		return 0, InvalidArgument
	}
	key, st := rs.Send(s.enc.Bytes())
	switch st {
	case netio.OK:
		return key, OK
	case netio.NoResources:
		return 0, NoResources
	case netio.InvalidArgument:
		return 0, InvalidArgument
	case netio.Closed:
		return 0, Closed
	}
	return 0, Failed
}

// Close closes every connection; messages still waiting are reported
// Canceled. It is idempotent; it must not be called from a callback.
func (s *Sender) Close() error {
	s.mu.Lock()
	s.closed = true
	senders := s.senders
	s.senders = map[string]*endpoint.ReconnectingSender{}
	s.mu.Unlock()
	var err error
	for _, rs := range senders {
		err = errors.Join(err, rs.Close())
	}
	return err
}
