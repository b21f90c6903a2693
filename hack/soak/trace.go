package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/endpoint"
)

// Bounds of what a run keeps for its timelines: a 20 s run has tens of
// connection changes, faults and accepts, and thousands of keys.
const (
	maxEvents   = 4096 // run-wide events (faults, accepts, closes, log lines)
	maxTimeline = 24   // lines of one lost stream's timeline
	maxKeyRuns  = 4    // runs of consecutive lost keys described per stream
)

// The stream of an event that concerns no stream in particular (a log
// line, a connection that carried nothing), and of one every stream's
// timeline shows (a fault).
const (
	noStream    = -1
	everyStream = -2
)

// event is one thing that happened, at a time since the run's start.
type event struct {
	at     time.Duration
	stream int // the stream it concerns, noStream or everyStream
	what   string
}

// rconn is what the soak saw of one accepted connection.
type rconn struct {
	id       uint64
	peer     string
	accepted time.Duration
	closed   time.Duration // 0: open at the end
	reason   string
	streams  map[uint64]*carried // by stream
}

// carried is what one connection delivered of one stream.
type carried struct {
	first, last     uint64 // keys
	firstAt, lastAt time.Duration
	n               int
}

// keyTimes is when a stream's keys were handed over and reported, by key.
type keyTimes struct {
	handedAts []time.Duration // key k at k-1; written by the stream's send goroutine only

	mu       sync.Mutex
	reported []report // key k at k-1
}

// report is when and how a key was reported.
type report struct {
	at     time.Duration
	status netio.Status
	done   bool
}

// trace records the run's events with their times, so that a run that
// loses messages can say, per lost stream, what happened around them.
type trace struct {
	start time.Time

	mu      sync.Mutex
	events  []event
	skipped int // events beyond maxEvents
	conns   map[*endpoint.ReceiveEndpoint]*rconn
	order   []*rconn // in accept order
}

func newTrace() *trace {
	return &trace{start: time.Now(), conns: map[*endpoint.ReceiveEndpoint]*rconn{}}
}

// since is the time since the run's start.
func (t *trace) since() time.Duration { return time.Since(t.start) }

// add records an event.
func (t *trace) add(stream int, format string, args ...any) {
	at := t.since()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) == maxEvents {
		t.skipped++
		return
	}
	t.events = append(t.events, event{at: at, stream: stream, what: fmt.Sprintf(format, args...)})
}

// Write takes the library's log lines (zerolog JSON, one per Write) as
// events of no stream, so that rejections, receive errors and connection
// ends are on the timeline. A failed send's line is left out: the key's
// report is kept apart (keyTimes), and a broken connection logs one per
// message in flight, which would crowd the rest out of maxEvents.
func (t *trace) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte(`"message":"send failed"`)) {
		t.add(noStream, "log %s", bytes.TrimSpace(p))
	}
	return len(p), nil
}

// accepted records a connection the listener accepted.
func (t *trace) accepted(ep *endpoint.ReceiveEndpoint) {
	c := &rconn{id: ep.ID(), peer: ep.RemoteAddr(), accepted: t.since(), streams: map[uint64]*carried{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[ep] = c
	t.order = append(t.order, c)
}

// closed records the end of an accepted connection.
func (t *trace) closed(ep *endpoint.ReceiveEndpoint, err error) {
	at := t.since()
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.conns[ep]; c != nil {
		c.closed, c.reason = at, fmt.Sprint(err)
	}
}

// delivered records that ep delivered key of stream. It runs on the
// listener's poller, once per message.
func (t *trace) delivered(ep *endpoint.ReceiveEndpoint, stream, key uint64) {
	at := t.since()
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.conns[ep]
	if c == nil { // data before OnConnectionEstablished
		c = &rconn{id: ep.ID(), peer: ep.RemoteAddr(), accepted: -1, streams: map[uint64]*carried{}}
		t.conns[ep] = c
		t.order = append(t.order, c)
	}
	s := c.streams[stream]
	if s == nil {
		s = &carried{first: key, firstAt: at}
		c.streams[stream] = s
	}
	s.last, s.lastAt = key, at
	s.n++
}

// handed records that key was handed over now. Only the stream's send
// goroutine calls it, with keys in order from 1.
func (k *keyTimes) handed(t *trace, key uint64) {
	if uint64(len(k.handedAts)) == key-1 {
		k.handedAts = append(k.handedAts, t.since())
	}
}

// report records key's report.
func (k *keyTimes) report(t *trace, key uint64, status netio.Status) {
	at := t.since()
	k.mu.Lock()
	defer k.mu.Unlock()
	for uint64(len(k.reported)) < key {
		k.reported = append(k.reported, report{})
	}
	k.reported[key-1] = report{at: at, status: status, done: true}
}

// reportOf returns key's report.
func (k *keyTimes) reportOf(key uint64) report {
	k.mu.Lock()
	defer k.mu.Unlock()
	if key == 0 || key > uint64(len(k.reported)) {
		return report{}
	}
	return k.reported[key-1]
}

// handedAt returns when key was handed over, or -1.
func (k *keyTimes) handedAt(key uint64) time.Duration {
	if key == 0 || key > uint64(len(k.handedAts)) {
		return -1
	}
	return k.handedAts[key-1]
}

// keyRun is a run of consecutive lost keys.
type keyRun struct{ first, last uint64 }

// timeline is the lost stream's story, earliest first and at most
// maxTimeline lines. Always in it: its lost keys (when the first runs were
// handed over and reported, and how) and the accepted connections that
// carried it (peer, keys, how they ended). As far as room is left, what
// happened from a second before its first lost key was handed over to a
// second after its last was reported, earliest first: its connection
// changes, the faults, the connections that carried no stream, and the
// library's log lines.
func (t *trace) timeline(stream int, kt *keyTimes, lost []keyRun) []string {
	var keep, near []event
	from, to := time.Duration(1<<62), time.Duration(0)
	for _, r := range lost {
		h0, h1 := kt.handedAt(r.first), kt.handedAt(r.last)
		r0, r1 := kt.reportOf(r.first), kt.reportOf(r.last)
		keep = append(keep, event{at: h0, stream: stream, what: fmt.Sprintf("keys %d-%d handed over (last at %s)", r.first, r.last, ms(h1))})
		if r0.done {
			keep = append(keep, event{at: r0.at, stream: stream, what: fmt.Sprintf("key %d reported %v; key %d %s", r.first, r0.status, r.last, describe(r1))})
		}
		from, to = min(from, h0), max(to, r1.at, r0.at, h1)
	}
	from, to = from-time.Second, to+time.Second
	inWindow := func(at time.Duration) bool { return at >= from && at <= to }
	t.mu.Lock()
	for _, e := range t.events {
		if (e.stream == stream || e.stream == everyStream || e.stream == noStream) && inWindow(e.at) {
			near = append(near, e)
		}
	}
	for _, c := range t.order {
		s, carriedIt := c.streams[uint64(stream)]
		switch {
		case carriedIt:
			keep = append(keep, event{at: c.accepted, what: fmt.Sprintf("accepted conn %d from %s: carried keys %d-%d (%d) from %s to %s; %s",
				c.id, c.peer, s.first, s.last, s.n, ms(s.firstAt), ms(s.lastAt), c.end())})
		case len(c.streams) == 0 && c.accepted <= to && (c.closed == 0 || c.closed >= from):
			near = append(near, event{at: c.accepted, what: fmt.Sprintf("accepted conn %d from %s: carried nothing; %s", c.id, c.peer, c.end())})
		}
	}
	t.mu.Unlock()
	byTime := func(a, b event) int { return int(a.at - b.at) }
	slices.SortStableFunc(near, byTime)
	keep = keep[:min(len(keep), maxTimeline)]
	left := len(near) - (maxTimeline - len(keep))
	evs := append(keep, near[:min(len(near), maxTimeline-len(keep))]...)
	slices.SortStableFunc(evs, byTime)
	out := make([]string, 0, len(evs)+1)
	for _, e := range evs {
		out = append(out, ms(e.at)+" "+e.what)
	}
	if left > 0 {
		out = append(out, fmt.Sprintf("... %d more", left))
	}
	return out
}

// end says how an accepted connection ended.
func (c *rconn) end() string {
	if c.closed == 0 {
		return "open at the end"
	}
	return "closed at " + ms(c.closed) + ": " + c.reason
}

// describe says how a key was reported.
func describe(r report) string {
	if !r.done {
		return "never reported"
	}
	return fmt.Sprintf("reported %v at %s", r.status, ms(r.at))
}

// ms formats a time since the start.
func ms(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// dump writes every event, earliest first, then every accepted
// connection and what it carried, to path (--trace).
func (t *trace) dump(path string) error {
	var e bytes.Buffer
	t.dumpTo(&e)
	return os.WriteFile(path, e.Bytes(), 0o644)
}

// dumpTo writes what dump writes to w.
func (t *trace) dumpTo(w io.Writer) {
	var b bytes.Buffer
	t.mu.Lock()
	evs := slices.Clone(t.events)
	for _, c := range t.order {
		fmt.Fprintf(&b, "conn %d from %s accepted at %s, %s\n", c.id, c.peer, ms(c.accepted), c.end())
		for _, id := range slices.Sorted(maps.Keys(c.streams)) {
			s := c.streams[id]
			fmt.Fprintf(&b, "  stream %d: keys %d-%d (%d) from %s to %s\n", id, s.first, s.last, s.n, ms(s.firstAt), ms(s.lastAt))
		}
	}
	if t.skipped > 0 {
		fmt.Fprintf(&b, "%d events beyond the first %d not kept\n", t.skipped, maxEvents)
	}
	t.mu.Unlock()
	slices.SortStableFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	for _, ev := range evs {
		fmt.Fprintf(w, "%s [%d] %s\n", ms(ev.at), ev.stream, ev.what)
	}
	_, _ = w.Write(b.Bytes())
}
