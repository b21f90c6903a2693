package hostile_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/tests/storm/leakcheck"
	"github.com/netio-go/netio/tests/storm/traffic"
)

// TestMain removes the built peer and fails the package if any goroutine
// outlives the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	hostilePeer.Remove()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var providers = []string{"tcp", "sockets"}

// waitTimeout bounds every wait for a delivery or a teardown: generous,
// for a loaded 2-core machine under -race.
const waitTimeout = 30 * time.Second

// The listener's receive buffers, and the well-behaved stream's send
// buffers (no more in flight than the receiver keeps posted).
var (
	recvParams = netio.ReceiveParams{BufferSize: 4096, BufferCount: 16}
	goodParams = netio.BufferedSendParams{BufferSize: 4096, BufferCount: 8}
)

// Streams of the checker: a warm-up, then the one that runs alongside the
// hostile peer.
const (
	warmStream = iota
	goodStream
	streams
)

// scene is a listener serving a well-behaved stream while a hostile peer
// does its worst, with everything the receiver reports collected.
type scene struct {
	t         *testing.T
	prov      string
	coalesced bool // the listener decodes coalesced buffers (OnMessage)
	mgr       *domain.Manager
	l         *traffic.Listener
	check     *traffic.Checker
	logs      *logCounter
	before    leakcheck.Snapshot

	recvErrs atomic.Int64 // OnReceiveError calls
	mu       sync.Mutex
	errs     []error                                // the first few receive errors
	errEPs   map[*endpoint.ReceiveEndpoint]struct{} // the endpoints that reported them
	foreign  [][]byte                               // copies of what hostile connections delivered
}

// maxKept bounds the receive errors and foreign messages a scene keeps.
const maxKept = 4096

// How a scene's listener delivers what it receives.
type delivery int

const (
	raw       delivery = iota // OnData: each message as received
	coalesced                 // OnMessage: each message decoded as a coalesced buffer
)

// newScene opens a domain and a listener, runs a warm-up stream through
// it (so that what the provider opens once is in the baseline) and takes
// the baseline. With coalesced delivery the good streams send coalesced
// buffers. Options adjust the listener's configuration.
func newScene(t *testing.T, prov string, how delivery, options ...func(*endpoint.ListenConfig)) *scene {
	t.Helper()
	s := &scene{t: t, prov: prov, coalesced: how == coalesced, logs: newLogCounter(),
		errEPs: make(map[*endpoint.ReceiveEndpoint]struct{})}
	var err error
	s.mgr, err = domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.mgr.Close()) })
	s.check = traffic.NewChecker(streams, traffic.MaxMessage(goodParams.BufferSize, s.coalesced))
	s.check.Foreign = s.onForeign
	cfg := endpoint.ListenConfig{
		Params:         recvParams,
		OnData:         s.check.OnData,
		OnReceiveError: s.onReceiveError,
		Runtime:        cq.Runtime{Logger: s.logs.logger()},
	}
	if s.coalesced {
		cfg.OnData = nil
		cfg.OnMessage = func(ep *endpoint.ReceiveEndpoint, _ uint64, data []byte, _ uint8) { s.check.OnData(ep, data) }
	}
	for _, o := range options {
		o(&cfg)
	}
	s.l = traffic.Listen(t, s.mgr, cfg)
	warm := traffic.Sender{Stream: warmStream, Count: 100, Params: goodParams, Coalesced: s.coalesced}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	_, err = warm.Run(ctx, s.mgr, s.l.Addr())
	require.NoError(t, err, "warm-up stream")
	s.l.WaitQuiet(t, waitTimeout)
	s.before = leakcheck.Steady(s.mgr)
	return s
}

// onForeign keeps a copy of what a hostile connection delivered: its raw
// messages, or with coalesced delivery the messages decoded from them. It
// runs on the poller goroutine.
func (s *scene) onForeign(_ *endpoint.ReceiveEndpoint, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.foreign) < maxKept {
		s.foreign = append(s.foreign, bytes.Clone(data))
	}
}

// onReceiveError counts and keeps receive errors. It runs on the poller
// goroutine.
func (s *scene) onReceiveError(ep *endpoint.ReceiveEndpoint, err error) {
	s.recvErrs.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errEPs[ep] = struct{}{}
	if len(s.errs) < maxKept {
		s.errs = append(s.errs, err)
	}
}

// foreignMessages returns copies of what hostile connections delivered.
func (s *scene) foreignMessages() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.foreign...)
}

// endpointStats sums the counters of the endpoints that reported receive
// errors: each endpoint must count what it reported.
func (s *scene) endpointStats() endpoint.ReceiveStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum endpoint.ReceiveStats
	for ep := range s.errEPs {
		st := ep.Stats()
		sum.Messages += st.Messages
		sum.Bytes += st.Bytes
		sum.Errors += st.Errors
		sum.CoalescedMessages += st.CoalescedMessages
		sum.MalformedBuffers += st.MalformedBuffers
	}
	return sum
}

// receiveErrors returns the receive errors kept so far.
func (s *scene) receiveErrors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// alongside streams the good stream while hostile runs, from before it
// starts until after it returns, and checks that every message the stream
// sent arrived intact and in order.
func (s *scene) alongside(hostile func()) traffic.Result {
	t := s.t
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitTimeout)
	defer cancel()
	stop, connected := make(chan struct{}), make(chan struct{})
	type outcome struct {
		res traffic.Result
		err error
	}
	done := make(chan outcome, 1)
	good := traffic.Sender{Stream: goodStream, Count: 200, Until: stop, Limit: 200000, Params: goodParams,
		Connected: func() { close(connected) }, Coalesced: s.coalesced}
	go func() {
		res, err := good.Run(ctx, s.mgr, s.l.Addr())
		done <- outcome{res, err}
	}()
	select {
	case <-connected:
	case o := <-done:
		require.NoError(t, o.err, "good stream ended before it connected")
	}
	hostile()
	close(stop)
	o := <-done
	require.NoError(t, o.err, "good stream")
	assert.Equal(t, o.res.Sent, o.res.Completed, "good stream: sends completed")
	assert.Zero(t, o.res.Failed, "good stream: sends failed")
	assert.Eventually(t, func() bool { return s.check.Delivered(goodStream) == o.res.Sent }, waitTimeout, time.Millisecond,
		"good stream: messages delivered")
	rep := s.check.Report()
	assert.Equal(t, o.res.Sent, rep.Delivered[goodStream], "good stream: messages delivered intact and in order")
	assert.Zero(t, rep.Problems, "good stream: damaged or misplaced messages: %v", rep.Errors)
	t.Logf("%s: good stream alongside: %d messages sent, %d delivered intact", s.prov, o.res.Sent, rep.Delivered[goodStream])
	return o.res
}

// attack runs the hostile peer in mode while the good stream flows, and
// returns the peer's report, the most the process held and the most
// connections the listener had open meanwhile.
func (s *scene) attack(mode string, args ...string) (rep peerReport, peak leakcheck.Snapshot, live int) {
	s.t.Helper()
	s.alongside(func() {
		peak, live = s.sampled(func() { rep = runPeer(s.t, s.prov, mode, s.l.Addr(), args...) })
	})
	return rep, peak, live
}

// sampled runs fn and returns the most the process held, and the most
// connections the listener had open, while it ran.
func (s *scene) sampled(fn func()) (peak leakcheck.Snapshot, peakLive int) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			peak, peakLive = leakcheck.Max(peak, leakcheck.Take(s.mgr)), max(peakLive, s.l.Live())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak, peakLive
}

// assertBack waits until every connection has ended and checks that the
// process holds what it held before the hostile peer came.
func (s *scene) assertBack(what string) {
	s.t.Helper()
	s.l.WaitQuiet(s.t, waitTimeout)
	leakcheck.AssertBack(s.t, s.mgr, s.before, s.prov+" "+what)
}

// logCounter counts the lines a zerolog logger writes, by level and
// message; the receiver's log is where its errors must show.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int // "level: message" → lines
}

func newLogCounter() *logCounter { return &logCounter{n: make(map[string]int)} }

// logger returns a logger whose every line is counted and discarded.
func (c *logCounter) logger() zerolog.Logger {
	return zerolog.New(io.Discard).Level(zerolog.DebugLevel).Hook(c)
}

// Run counts one line; it is the zerolog.Hook.
func (c *logCounter) Run(_ *zerolog.Event, level zerolog.Level, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[level.String()+": "+msg]++
}

// count returns how many lines of level and message were logged.
func (c *logCounter) count(level zerolog.Level, msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[level.String()+": "+msg]
}

// summary lists what was logged, one "N × level: message" per line, for
// t.Log.
func (c *logCounter) summary() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := make([]string, 0, len(c.n))
	for k, n := range c.n {
		lines = append(lines, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
