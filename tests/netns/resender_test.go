package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// resenderReport is what a resender saw: every key Send accepted must be
// reported exactly once, so HandedOver = Completed + Failed + Canceled with
// nothing unexpected or unreported. The keys reported Failed or Canceled
// are listed: the test matches them against what the receivers delivered.
type resenderReport struct {
	HandedOver uint64 `json:"handed_over"` // Send returned OK
	// Outage counts, of HandedOver, those accepted after a connection
	// ended and before the next was up: they waited in the backlog.
	Outage       uint64   `json:"handed_over_in_outage"`
	Completed    uint64   `json:"completed"`
	Failed       uint64   `json:"failed"`
	Canceled     uint64   `json:"canceled"`
	FailedKeys   []uint64 `json:"failed_keys,omitempty"`
	CanceledKeys []uint64 `json:"canceled_keys,omitempty"`
	Unexpected   uint64   `json:"unexpected_keys"` // reported twice, or never accepted
	Unreported   uint64   `json:"unreported_keys"` // accepted, never reported
	// WrongKeys counts messages Send gave another key than the sequence
	// number they carry: keys run from 1 in the order Send accepts.
	WrongKeys uint64 `json:"wrong_keys"`
	// Full counts Sends refused because the backlog was full (retried).
	Full uint64 `json:"full"`
	// Settled is set when every key was reported before Close, so that
	// none had to be canceled.
	Settled bool `json:"settled"`
	// Stats is the sender's own count, taken after Close.
	Stats     endpoint.ReconnectStats `json:"stats"`
	SendError string                  `json:"send_error,omitempty"`
	TimedOut  bool                    `json:"timed_out"`
}

// A key's state in a resender.
const (
	keyPending uint8 = iota
	keyCompleted
	keyFailed
	keyCanceled
)

// resender is the resender role's state shared with the callbacks.
type resender struct {
	out *emitter

	mu       sync.Mutex
	keys     []uint8 // state of key i; key 0 is never used
	reported uint64
	rep      resenderReport
	conns    uint64 // connections established so far
	up       bool   // a connection is up
}

// How the resender dials and waits; short backoffs and timeouts, so that it
// reconnects within a test's patience.
const (
	resendInitialBackoff = 10 * time.Millisecond
	resendDialTimeout    = 2 * time.Second
	// resendFullWait is how long Send waits after finding the backlog full.
	resendFullWait = 500 * time.Microsecond
	// settleWait bounds the wait for the backlog to drain and every key to
	// be reported once the test says finish.
	settleWait = 30 * time.Second
)

// runResender hands messages 1, 2, … of cfg.Stream (the sequence number is
// the key Send returns) to a ReconnectingSender for cfg.Connect at
// cfg.Rate, whatever the connection's state, as a front-end produces data
// whether or not its event builder listens, until cfg.Count or a "finish"
// line on stdin;
// then it waits until every key was reported, closes, and reports. It
// reports each connection as a connected and a closed event, numbered
// from 1.
func runResender(ctx context.Context, mgr *domain.Manager, cfg roleConfig, out *emitter, log zerolog.Logger) error {
	if cfg.Count >= recordSize {
		return fmt.Errorf("count %d: the receivers' delivery records hold sequence numbers below %d", cfg.Count, recordSize)
	}
	s := &resender{out: out, keys: make([]uint8, 1, cfg.Count+1)}
	rs, err := endpoint.DialReconnecting(mgr, cfg.Connect, endpoint.ReconnectConfig{
		Send: endpoint.SendConfig{
			Params:           netio.BufferedSendParams{BufferSize: cfg.Size, BufferCount: cfg.Buffers},
			DeliveryComplete: cfg.DeliveryComplete,
			ProgressTimeout:  cfg.ProgressTimeout,
			Runtime:          cq.Runtime{Logger: log},
		},
		Backlog:            cfg.Backlog,
		InitialBackoff:     resendInitialBackoff,
		MaxBackoff:         cfg.MaxBackoff,
		DialTimeout:        resendDialTimeout,
		OnSendCompleted:    s.onCompleted,
		OnConnectionChange: s.onChange,
	})
	if err != nil {
		return err
	}
	s.stream(ctx, rs, cfg, requested(os.Stdin, "finish"))
	settled := s.waitSettled(ctx, rs)
	closeErr := rs.Close()

	s.mu.Lock()
	rep := s.rep
	for _, st := range s.keys[1:] {
		if st == keyPending {
			rep.Unreported++
		}
	}
	s.mu.Unlock()
	rep.Settled = settled
	rep.Stats = rs.Stats()
	rep.TimedOut = ctx.Err() != nil
	out.emit(event{Event: evReport, Resender: &rep})
	return closeErr
}

// stream hands messages over until cfg.Count, finish, or the end of ctx.
func (s *resender) stream(ctx context.Context, rs *endpoint.ReconnectingSender, cfg roleConfig, finish <-chan struct{}) {
	msg := make([]byte, cfg.Size)
	start := time.Now()
	for key := uint64(1); key <= cfg.Count; {
		if cfg.Rate > 0 { // message key is due (key-1)/Rate after the start
			time.Sleep(time.Until(start.Add(time.Duration(key-1) * time.Second / time.Duration(cfg.Rate))))
		}
		select {
		case <-finish:
			return
		case <-ctx.Done():
			return
		default:
		}
		msgPattern.Fill(msg, cfg.Stream, key)
		s.expect()
		got, st := rs.Send(msg)
		switch st {
		case netio.OK:
			s.accepted(got != key)
			key++
		case netio.NoResources: // backlog full (or every buffer in flight): retry
			s.unexpect(true)
			time.Sleep(resendFullWait)
		default:
			s.unexpect(false)
			s.mu.Lock()
			s.rep.SendError = fmt.Sprintf("send %d: %v", key, st)
			s.mu.Unlock()
			return
		}
	}
}

// expect makes room for the next key before Send, whose completion may be
// reported before Send returns.
func (s *resender) expect() {
	s.mu.Lock()
	s.keys = append(s.keys, keyPending)
	s.mu.Unlock()
}

// unexpect takes the room back when Send refused the message.
func (s *resender) unexpect(full bool) {
	s.mu.Lock()
	s.keys = s.keys[:len(s.keys)-1]
	if full {
		s.rep.Full++
	}
	s.mu.Unlock()
}

// accepted counts a message Send took.
func (s *resender) accepted(wrongKey bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.HandedOver++
	if wrongKey {
		s.rep.WrongKeys++
	}
	if s.conns > 0 && !s.up {
		s.rep.Outage++
	}
}

// onCompleted runs on a poller goroutine, or on Close's for Canceled.
func (s *resender) onCompleted(key uint64, st netio.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key == 0 || key >= uint64(len(s.keys)) || s.keys[key] != keyPending {
		s.rep.Unexpected++
		return
	}
	s.reported++
	switch st {
	case netio.OK:
		s.keys[key] = keyCompleted
		s.rep.Completed++
	case netio.Canceled:
		s.keys[key] = keyCanceled
		s.rep.Canceled++
		s.rep.CanceledKeys = append(s.rep.CanceledKeys, key)
	default:
		s.keys[key] = keyFailed
		s.rep.Failed++
		s.rep.FailedKeys = append(s.rep.FailedKeys, key)
	}
}

// onChange runs on the sender's dial goroutine.
func (s *resender) onChange(connected bool, err error) {
	s.mu.Lock()
	if connected {
		s.conns++
	}
	s.up = connected
	conn := s.conns
	s.mu.Unlock()
	if connected {
		s.out.emit(event{Event: evConnected, Conn: conn})
		return
	}
	s.out.emit(event{Event: evClosed, Conn: conn, Error: err.Error(),
		PeerClosed: errors.Is(err, netio.ErrConnectionClosed), Timeout: errors.Is(err, netio.ErrTimeout)})
}

// waitSettled waits until the backlog is empty and every key handed over
// was reported, at most settleWait; it reports whether that happened.
func (s *resender) waitSettled(ctx context.Context, rs *endpoint.ReconnectingSender) bool {
	deadline := time.Now().Add(settleWait)
	for {
		s.mu.Lock()
		done := s.reported == s.rep.HandedOver
		s.mu.Unlock()
		if done && rs.Stats().Backlog == 0 {
			return true
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
