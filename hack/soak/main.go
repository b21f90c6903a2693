// Command soak runs a mixed workload with faults for a given time and
// accounts for every message: handed over, delivered, reported failed.
//
//	go run ./hack/soak --duration 60s [--provider tcp] [--senders 4]
//
// Senders are endpoint.ReconnectingSenders streaming messages of random
// sizes into one listener on 127.0.0.1. Every message is the test pattern
// with its header (package internal/testpattern), naming its sender as the
// stream and its key as the sequence number, so the receiver checks length
// and content and records which keys arrived. While they stream, a fault loop restarts the listener,
// closes connections from the server side and churns idle connections.
// At the end every sender is drained and closed, and each key handed over
// must be delivered or reported failed (or both: a message in flight when
// its connection broke may have arrived although its sender could not know).
// The summary line is JSON; the exit status is 1 when a message was lost,
// delivered twice or corrupted, 2 for bad flags, 3 when the run was still
// going --stuck-after past its duration (it then prints every goroutine's
// stack and its trace instead).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
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

// headerLen is the shortest message: the pattern's header alone.
const headerLen = testpattern.HeaderSize

type options struct {
	duration   time.Duration
	provider   string
	senders    int
	faultEvery time.Duration
	maxSize    int
	seed       uint64
	trace      string // file for the whole trace, "" for none
	stuck      time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long to stream")
	fs.StringVar(&o.provider, "provider", "tcp", "libfabric provider: tcp, the one that completes sends on delivery")
	fs.IntVar(&o.senders, "senders", 4, "reconnecting senders")
	fs.DurationVar(&o.faultEvery, "fault-every", 2*time.Second, "time between faults")
	fs.IntVar(&o.maxSize, "max-size", 16<<10, "largest message in bytes")
	fs.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "random seed (printed)")
	fs.StringVar(&o.trace, "trace", "", "write every event of the run (bounded) to this file")
	fs.DurationVar(&o.stuck, "stuck-after", 2*time.Minute, "past the duration, give up: print every goroutine and the trace, exit 3")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.provider != "tcp":
		return o, errors.New("--provider: exact accounting needs delivery-complete sends, which only tcp offers in libfabric 1.17")
	case o.duration <= 0 || o.faultEvery <= 0 || o.stuck <= 0:
		return o, errors.New("--duration, --fault-every and --stuck-after must be positive")
	case o.senders < 1 || o.senders > 64:
		return o, errors.New("--senders must be 1..64")
	case o.maxSize < headerLen || o.maxSize > 1<<20:
		return o, fmt.Errorf("--max-size must be %d..%d", headerLen, 1<<20)
	}
	return o, nil
}

// keySet is a growable bitset of keys, safe for concurrent use.
type keySet struct {
	mu   sync.Mutex
	bits []uint64
}

// add sets key and reports whether it was set already.
func (s *keySet) add(key uint64) (dup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := int(key / 64)
	for len(s.bits) <= w {
		s.bits = append(s.bits, 0)
	}
	mask := uint64(1) << (key % 64)
	dup = s.bits[w]&mask != 0
	s.bits[w] |= mask
	return dup
}

// snapshot returns a copy of the set.
func (s *keySet) snapshot() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.bits...)
}

// count returns how many keys are in a, and how many of them are also in b.
func count(a, b []uint64) (n, both int) {
	for i, w := range a {
		n += bits.OnesCount64(w)
		if i < len(b) {
			both += bits.OnesCount64(w & b[i])
		}
	}
	return n, both
}

// stream is one sender's account.
type stream struct {
	rs        *endpoint.ReconnectingSender
	delivered keySet
	failed    keySet
	reported  atomic.Uint64
	times     keyTimes
}

// soak is the whole run's state.
type soak struct {
	o        options
	pat      *testpattern.Pattern
	mgr      *domain.Manager
	addr     string
	streams  []*stream
	listener atomic.Pointer[endpoint.Listener]
	tr       *trace

	verifyErrors, duplicates, foreign atomic.Uint64
	faults                            map[string]int
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	res, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if res.Lost != 0 || res.Duplicates != 0 || res.VerifyErrors != 0 {
		os.Exit(1)
	}
}

// result is the summary line.
type result struct {
	Provider     string         `json:"provider"`
	Seconds      float64        `json:"seconds"`
	Seed         uint64         `json:"seed"`
	HandedOver   uint64         `json:"handed_over"`
	Delivered    uint64         `json:"delivered"`
	Failed       uint64         `json:"failed"`
	Both         uint64         `json:"delivered_and_reported_failed"`
	Lost         int64          `json:"lost"`
	Duplicates   uint64         `json:"duplicates"`
	VerifyErrors uint64         `json:"verify_errors"`
	Connections  uint64         `json:"connections"`
	Faults       map[string]int `json:"faults"`
	// LostDetail names, per stream that lost messages, its first lost
	// keys and whether its sender reported every key: reported all means
	// a lost key was reported OK and never delivered; fewer means some
	// key was never reported at all. Its timeline says what happened
	// around them.
	LostDetail []lostStream `json:"lost_detail,omitempty"`
	// PollerDropped counts, by poller (the listener's, the senders'),
	// the completions and events read after their endpoint had gone
	// (stats.Poller.Dropped): on the listener's, messages the provider
	// had placed, and with DeliveryComplete acknowledged, that no OnData
	// saw.
	PollerDropped map[string]uint64 `json:"poller_dropped"`
}

// lostStream is one stream's part of result.LostDetail.
type lostStream struct {
	Stream     int      `json:"stream"`
	HandedOver uint64   `json:"handed_over"`
	Reported   uint64   `json:"reported"`
	Lost       int      `json:"lost"`
	FirstKeys  []uint64 `json:"first_keys"`
	// Timeline is the stream's story around its lost keys, times since
	// the start (trace.timeline).
	Timeline []string `json:"timeline"`
	runs     []keyRun // the first maxKeyRuns runs of consecutive lost keys
}

// has reports whether key is in the snapshot set.
func has(set []uint64, key uint64) bool {
	w := int(key / 64)
	return w < len(set) && set[w]&(uint64(1)<<(key%64)) != 0
}

// lostKeys lists the keys of st (handed out from 1) that were neither
// delivered nor reported failed.
func (st *stream) lostKeys(index int, handedOver uint64) (lostStream, bool) {
	d, f := st.delivered.snapshot(), st.failed.snapshot()
	ls := lostStream{Stream: index, HandedOver: handedOver, Reported: st.reported.Load()}
	for key := uint64(1); key <= handedOver; key++ {
		if has(d, key) || has(f, key) {
			continue
		}
		if ls.Lost++; len(ls.FirstKeys) < 16 {
			ls.FirstKeys = append(ls.FirstKeys, key)
		}
		if n := len(ls.runs); n > 0 && ls.runs[n-1].last+1 == key {
			ls.runs[n-1].last = key
		} else if n < maxKeyRuns {
			ls.runs = append(ls.runs, keyRun{key, key})
		}
	}
	return ls, ls.Lost > 0
}

// Names of the soak's pollers, for their dropped completions.
const (
	listenerPoller = "soak-listener"
	senderPoller   = "soak-sender"
)

func run(o options) (result, error) {
	tr := newTrace()
	defer watchdog(o.duration+o.stuck, tr, o.trace, os.Stderr)()
	mgr, err := domain.Open(domain.Config{Provider: o.provider, Address: "127.0.0.1",
		Logger: zerolog.New(tr).Level(zerolog.DebugLevel)})
	if err != nil {
		return result{}, err
	}
	defer mgr.Close()
	s := &soak{o: o, pat: testpattern.New(o.maxSize, testpattern.WithHeader()), mgr: mgr, faults: map[string]int{}, tr: tr}
	if err := s.startListener("127.0.0.1:0"); err != nil {
		return result{}, err
	}
	s.addr = s.listener.Load().Addr()
	if err := s.startSenders(); err != nil {
		return result{}, err
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	defer cancel()
	var wg sync.WaitGroup
	for i, st := range s.streams {
		wg.Add(1)
		go func() { defer wg.Done(); s.send(ctx, uint32(i), st) }()
	}
	s.injectFaults(ctx)
	wg.Wait()
	elapsed := time.Since(start)
	s.settle()
	res := s.account(elapsed)
	err = s.listener.Load().Close()
	if o.trace != "" {
		err = errors.Join(err, tr.dump(o.trace))
	}
	return res, err
}

func (s *soak) startListener(addr string) error {
	cfg := endpoint.ListenConfig{
		Params:                  netio.ReceiveParams{BufferSize: s.o.maxSize, BufferCount: 64},
		OnData:                  s.receive,
		OnConnectionEstablished: s.tr.accepted,
		OnConnectionClosed:      s.tr.closed,
		Runtime:                 cq.Runtime{PollerConfig: cq.Config{Name: listenerPoller}},
	}
	var err error
	for range 50 { // the old listener's port goes when its poller stops
		var l *endpoint.Listener
		if l, err = endpoint.Listen(s.mgr, addr, cfg); err == nil {
			s.listener.Store(l)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func (s *soak) startSenders() error {
	for i := range s.o.senders {
		st := &stream{}
		rs, err := endpoint.DialReconnecting(s.mgr, s.addr, endpoint.ReconnectConfig{
			// Delivery-complete sends make OK mean "in the receiver's
			// buffer", so a restart cannot swallow a message counted as sent.
			Send: endpoint.SendConfig{
				Params:           netio.BufferedSendParams{BufferSize: s.o.maxSize, BufferCount: 32},
				DeliveryComplete: true,
				Runtime:          cq.Runtime{PollerConfig: cq.Config{Name: senderPoller}},
			},
			InitialBackoff: 5 * time.Millisecond,
			MaxBackoff:     200 * time.Millisecond,
			DialTimeout:    2 * time.Second,
			OnSendCompleted: func(key uint64, status netio.Status) {
				if status != netio.OK {
					st.failed.add(key)
				}
				st.times.report(s.tr, key, status)
				st.reported.Add(1)
			},
			OnConnectionChange: func(connected bool, err error) {
				if connected {
					s.tr.add(i, "stream %d connected", i)
				} else {
					s.tr.add(i, "stream %d disconnected: %v", i, err)
				}
			},
		})
		if err != nil {
			return err
		}
		st.rs = rs
		s.streams = append(s.streams, st)
	}
	return nil
}

// send streams messages of random sizes until ctx ends. Keys are handed
// out in order from 1, so the key a message will get is known when it is
// written.
func (s *soak) send(ctx context.Context, id uint32, st *stream) {
	rng := rand.New(rand.NewPCG(s.o.seed, uint64(id)))
	msg := make([]byte, s.o.maxSize)
	for key := uint64(1); ctx.Err() == nil; {
		n := headerLen + rng.IntN(s.o.maxSize-headerLen+1)
		s.pat.Fill(msg[:n], uint64(id), key)
		for ctx.Err() == nil {
			got, status := st.rs.Send(msg[:n])
			if status == netio.OK {
				if got != key {
					panic(fmt.Sprintf("sender %d: key %d, expected %d", id, got, key))
				}
				st.times.handed(s.tr, key)
				key++
				break
			}
			time.Sleep(50 * time.Microsecond) // backlog full: wait for the link
		}
	}
}

// receive checks a message (length, content) as the message its header
// names and records its key. It runs on a poller.
func (s *soak) receive(ep *endpoint.ReceiveEndpoint, data []byte) {
	h, ok := testpattern.ParseHeader(data)
	if !ok {
		s.verifyErrors.Add(1)
		return
	}
	if h.Stream >= uint64(len(s.streams)) {
		s.foreign.Add(1)
		return
	}
	if s.pat.Check(data, h.Stream, h.Seq) != nil {
		s.verifyErrors.Add(1)
		return
	}
	if s.streams[h.Stream].delivered.add(h.Seq) {
		s.duplicates.Add(1)
	}
	s.tr.delivered(ep, h.Stream, h.Seq)
}

// injectFaults breaks things until ctx ends.
func (s *soak) injectFaults(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.o.seed, 1<<32))
	t := time.NewTicker(s.o.faultEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		began := s.tr.since()
		switch rng.IntN(3) {
		case 0:
			s.fault("listener restart", began, s.restartListener())
		case 1:
			s.fault("connection closed by server", began, s.closeConnection(rng))
		default:
			s.fault("idle connection churn", began, s.churn())
		}
	}
}

func (s *soak) fault(name string, began time.Duration, err error) {
	s.faults[name]++
	s.tr.add(everyStream, "fault %s, began at %s: %v", name, ms(began), err)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %s: %v\n", name, err)
	}
}

func (s *soak) restartListener() error {
	if err := s.listener.Load().Close(); err != nil {
		return err
	}
	return s.startListener(s.addr)
}

func (s *soak) closeConnection(rng *rand.Rand) error {
	conns := s.listener.Load().Connections()
	if len(conns) == 0 {
		return nil
	}
	c := conns[rng.IntN(len(conns))]
	s.tr.add(everyStream, "closing conn %d from %s", c.ID(), c.RemoteAddr())
	return c.Close()
}

// churn opens a connection that sends nothing and closes it.
func (s *soak) churn() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ep, err := endpoint.Dial(ctx, s.mgr, s.addr, endpoint.SendConfig{Params: netio.BufferedSendParams{BufferSize: 64, BufferCount: 1}})
	if err != nil {
		return err
	}
	return ep.Close()
}

// settle waits for every message handed over to be reported while the
// listener still runs, then closes the senders (what is left in a backlog
// is reported Canceled), then waits for the receiver to catch up: with
// DeliveryComplete a send is reported OK once the message is in a receive
// buffer, and its OnData may still be queued behind others there (the
// receiver checks every byte: about a millisecond for a 1 MiB message).
// Accounting before that counted such messages lost.
func (s *soak) settle() {
	deadline := time.Now().Add(15 * time.Second)
	for _, st := range s.streams {
		for st.reported.Load() < st.rs.Stats().HandedOver && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		_ = st.rs.Close()
	}
	for !s.caughtUp() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// caughtUp reports whether every key handed over has been delivered or
// reported failed.
func (s *soak) caughtUp() bool {
	for _, st := range s.streams {
		delivered, failed, both := st.tally()
		if uint64(delivered+failed-both) < st.rs.Stats().HandedOver {
			return false
		}
	}
	return true
}

// tally counts the stream's keys delivered, reported failed, and both.
func (st *stream) tally() (delivered, failed, both int) {
	d, f := st.delivered.snapshot(), st.failed.snapshot()
	delivered, both = count(d, f)
	failed, _ = count(f, nil)
	return delivered, failed, both
}

func (s *soak) account(elapsed time.Duration) result {
	r := result{
		Provider: s.o.provider, Seconds: elapsed.Seconds(), Seed: s.o.seed, Faults: s.faults,
		Duplicates: s.duplicates.Load(), VerifyErrors: s.verifyErrors.Load() + s.foreign.Load(),
	}
	for _, st := range s.streams {
		stats := st.rs.Stats()
		delivered, failed, both := st.tally()
		r.HandedOver += stats.HandedOver
		r.Delivered += uint64(delivered)
		r.Failed += uint64(failed)
		r.Both += uint64(both)
		r.Connections += stats.Connections
	}
	r.Lost = int64(r.HandedOver) - int64(r.Delivered+r.Failed-r.Both)
	if r.Lost != 0 {
		for i, st := range s.streams {
			if ls, lost := st.lostKeys(i, st.rs.Stats().HandedOver); lost {
				ls.Timeline = s.tr.timeline(i, &st.times, ls.runs)
				r.LostDetail = append(r.LostDetail, ls)
			}
		}
	}
	r.PollerDropped = map[string]uint64{}
	for _, p := range s.mgr.Snapshot().PollerTotals {
		r.PollerDropped[p.Name] += p.Dropped
	}
	return r
}
