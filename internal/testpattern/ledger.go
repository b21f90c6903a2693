package testpattern

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger holds a sender to what it was told: it records, per message of
// one stream (a pattern with a header), the status its send was reported
// with and whether the receiver got it intact, and says which messages
// were reported sent but never arrived (Lost). It is safe for concurrent
// use: the sender's completions and the receiver's data come on different
// goroutines.
type Ledger struct {
	pattern *Pattern
	stream  uint64

	mu        sync.Mutex
	reported  map[uint64]bool     // seq -> reported OK (false: failed or canceled)
	received  map[uint64]int      // seq -> times received intact
	damaged   []error             // messages that were not a message of the stream
	repeated  int                 // reports of a message already reported
	delivered int                 // messages received intact, repeats included
	inFlight  map[uint64][]uint64 // send key -> messages sent with it, oldest first
	unknown   int                 // completions of keys with nothing in flight
	done      chan struct{}       // a token per completion, as room allows
	completed atomic.Uint64       // completions of sends in flight (Completed)
}

// NewLedger returns a ledger of stream's messages of pattern p, which must
// have a header (WithHeader): the receiver learns each message's sequence
// number from it.
func NewLedger(p *Pattern, stream uint64) *Ledger {
	if !p.HasHeader() {
		panic("testpattern: a Ledger needs a pattern with a header")
	}
	return &Ledger{pattern: p, stream: stream, reported: map[uint64]bool{}, received: map[uint64]int{},
		inFlight: map[uint64][]uint64{}, done: make(chan struct{}, 1)}
}

// Sent records that message seq was sent with key (a buffer ID). A key may
// be reused once free: a buffer is free again before its completion is
// reported, so the next send from it may come first; completions of one
// key come in the order of its sends.
func (l *Ledger) Sent(key, seq uint64) {
	l.mu.Lock()
	l.inFlight[key] = append(l.inFlight[key], seq)
	l.mu.Unlock()
}

// Refused takes back the latest Sent of key: its send was refused, and
// nothing will report it. The message's sequence number may be sent again.
func (l *Ledger) Refused(key uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seqs := l.inFlight[key]; len(seqs) > 0 {
		l.inFlight[key] = seqs[:len(seqs)-1]
	}
}

// Completed records the report of the oldest send made with key, OK or
// not: the OnSendCompleted of a sender whose sends Sent recorded.
func (l *Ledger) Completed(key uint64, ok bool) {
	l.mu.Lock()
	seqs := l.inFlight[key]
	if len(seqs) == 0 {
		l.unknown++
		l.mu.Unlock()
		return
	}
	l.inFlight[key] = seqs[1:]
	l.mu.Unlock()
	l.Reported(seqs[0], ok)
	l.completed.Add(1)
	select {
	case l.done <- struct{}{}:
	default:
	}
}

// SendUntilStalled sends message 0, 1, ... with send, which sends message
// seq (recording it with Sent) or returns false when no buffer is free.
// While none is, it waits for a completion; when none comes for quiet it
// returns true: the sender is stalled. It returns false after max messages.
// A quiet window alone can be a loaded machine's pause rather than a stall:
// SendUntilStalledConfirmed asks for more.
func (l *Ledger) SendUntilStalled(max uint64, quiet time.Duration, send func(seq uint64) bool) bool {
	return l.SendUntilStalledConfirmed(max, quiet, send, nil)
}

// SendUntilStalledConfirmed is SendUntilStalled whose quiet counts as a
// stall only when stalled (if not nil) confirms it: say, the receiver is
// known to have stopped and the sender's poller made a pass that completed
// nothing. When stalled says no, it goes on waiting for a completion, and
// asks again after the next quiet.
func (l *Ledger) SendUntilStalledConfirmed(max uint64, quiet time.Duration, send func(seq uint64) bool, stalled func() bool) bool {
	t := time.NewTimer(quiet)
	defer t.Stop()
	for seq := range max {
		for !send(seq) {
			t.Reset(quiet)
			before := l.completed.Load()
			select {
			case <-l.done:
			case <-t.C:
				// A goroutine the machine did not run for longer than quiet
				// finds the timer and a completion's token both ready, and
				// select picks either: only a quiet without a completion
				// counts.
				if l.completed.Load() == before && (stalled == nil || stalled()) {
					return true
				}
			}
		}
	}
	return false
}

// Reported records that the send of message seq was reported, ok or not.
func (l *Ledger) Reported(seq uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, again := l.reported[seq]; again {
		l.repeated++
	}
	l.reported[seq] = ok
}

// Received checks data as a message of the stream and records it.
func (l *Ledger) Received(data []byte) {
	h, ok := ParseHeader(data)
	err := error(&Error{Kind: NotMessage, Stream: l.stream, Len: len(data)})
	if ok {
		err = l.pattern.Check(data, l.stream, h.Seq)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.damaged = append(l.damaged, err)
		return
	}
	l.received[h.Seq]++
	l.delivered++
}

// Delivered returns how many messages arrived intact, repeats included.
func (l *Ledger) Delivered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delivered
}

// AwaitDelivered waits until n messages arrived intact (Delivered), for as
// long as they keep arriving: it returns false once none arrived for idle.
// A drain under -race on a loaded machine may take far longer than any
// fixed window; a receiver that stops is what it catches.
func (l *Ledger) AwaitDelivered(n int, idle time.Duration) bool {
	last, since := l.Delivered(), time.Now()
	for last < n {
		time.Sleep(time.Millisecond)
		if now := l.Delivered(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) > idle {
			return false
		}
	}
	return true
}

// LedgerReport is what a Ledger found.
type LedgerReport struct {
	OK, NotOK int      // sends reported OK, and reported otherwise
	Unknown   int      // completions of keys with nothing in flight (Completed)
	Lost      []uint64 // reported OK, never received (ascending)
	Unsent    []uint64 // received, never reported at all (ascending)
	Repeated  int      // messages received more than once, and sends reported more than once
	Damaged   []error  // received data that was no message of the stream
	Delivered int      // messages received intact, repeats included
	// LateNotOK counts messages reported failed or canceled that arrived
	// all the same (allowed: a send whose completion the close overtook).
	LateNotOK int
}

// Report says what the ledger found so far.
func (l *Ledger) Report() LedgerReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := LedgerReport{Repeated: l.repeated, Damaged: slices.Clone(l.damaged), Delivered: l.delivered, Unknown: l.unknown}
	for seq, ok := range l.reported {
		n := l.received[seq]
		switch {
		case ok && n == 0:
			r.Lost = append(r.Lost, seq)
		case !ok && n > 0:
			r.LateNotOK++
		}
		if ok {
			r.OK++
		} else {
			r.NotOK++
		}
	}
	for seq, n := range l.received {
		if _, sent := l.reported[seq]; !sent {
			r.Unsent = append(r.Unsent, seq)
		}
		if n > 1 {
			r.Repeated++
		}
	}
	slices.Sort(r.Lost)
	slices.Sort(r.Unsent)
	return r
}

// String summarises the report in one line.
func (r LedgerReport) String() string {
	return fmt.Sprintf("%d reported OK, %d not OK (%d of those arrived); %d delivered; %d lost%s; %d never reported; %d repeated; %d damaged",
		r.OK, r.NotOK, r.LateNotOK, r.Delivered, len(r.Lost), span(r.Lost), len(r.Unsent), r.Repeated, len(r.Damaged))
}

// span names the first and last of ascending seqs, if any.
func span(seqs []uint64) string {
	switch len(seqs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" (%d)", seqs[0])
	}
	return fmt.Sprintf(" (%d..%d)", seqs[0], seqs[len(seqs)-1])
}

// Err returns nil when every send reported OK arrived, once and intact,
// and nothing arrived that was not sent; otherwise an error naming each
// fault (messages reported failed or canceled may arrive or not).
func (r LedgerReport) Err() error {
	var errs []error
	if len(r.Lost) > 0 {
		errs = append(errs, fmt.Errorf("%d messages reported OK never arrived%s", len(r.Lost), span(r.Lost)))
	}
	if len(r.Unsent) > 0 {
		errs = append(errs, fmt.Errorf("%d messages arrived that were never reported%s", len(r.Unsent), span(r.Unsent)))
	}
	if r.Repeated > 0 {
		errs = append(errs, fmt.Errorf("%d messages or reports repeated", r.Repeated))
	}
	if len(r.Damaged) > 0 {
		errs = append(errs, fmt.Errorf("%d damaged messages, the first: %w", len(r.Damaged), r.Damaged[0]))
	}
	if r.Unknown > 0 {
		errs = append(errs, fmt.Errorf("%d completions of keys with nothing in flight", r.Unknown))
	}
	return errors.Join(errs...)
}
