package endpoint_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// TestIdleTimeoutClosesASilentConnection: of two connections, the one that
// never sends is closed after IdleTimeout, and no connection is closed
// before IdleTimeout passed without a message: the busy one, which sends
// every 10 ms until the checks are done, stays open through several
// timeouts, unless the machine kept it from sending for that long, which a
// loaded machine can. The test then sees that silence in the arrival times
// and accepts the close, instead of assuming the sender's cadence.
func TestIdleTimeoutClosesASilentConnection(t *testing.T) {
	const idle = 100 * time.Millisecond
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			arrivals := newArrivalLog()
			rcv.onData = func(ep *endpoint.ReceiveEndpoint, _ []byte) { arrivals.message(ep) }
			l := arrivals.listen(t, mgr, rcv, idle)

			busy := dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}))
			dial(t, mgr, l.Addr(), newSender(4).config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}))
			waitFor(t, 5*time.Second, func() bool { return rcv.est.Load() == 2 }, "both connections established")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
			defer halt()
			wg.Add(1)
			go func() { // the busy connection, until the checks are done or it is closed
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					if buf := busy.GetBuffer(); buf != nil && busy.SendBuffer(buf, 8) != netio.OK {
						return
					}
				}
			}()

			var closes []idleClose
			for !slices.ContainsFunc(closes, func(c idleClose) bool { return !c.hadData }) && len(closes) < 2 {
				closes = append(closes, recvValue(t, arrivals.closes, 5*time.Second, "the silent connection closed"))
			}
			time.Sleep(3 * idle) // the busy connection goes on through more timeouts
			s := l.Stats()
			halt()
			for len(arrivals.closes) > 0 {
				closes = append(closes, <-arrivals.closes)
			}
			silent := 0
			for _, c := range closes {
				assert.ErrorIs(t, c.err, netio.ErrTimeout)
				assert.ErrorIs(t, c.err, netio.ErrConnectionClosed)
				if !c.hadData {
					silent++
					continue
				}
				// The busy connection: only after a silence of IdleTimeout,
				// less a tick of the watch for the order in which the
				// clocks are read.
				if assert.GreaterOrEqual(t, c.silence, idle*3/4, "the busy connection was closed %v after its last message", c.silence) {
					t.Logf("the busy connection was closed after %v without a message: the machine stalled it", c.silence)
				}
			}
			assert.Positive(t, silent, "the silent connection closed")
			assert.LessOrEqual(t, s.Active, 1, "the silent connection retired")
			assert.Equal(t, uint64(2), s.Accepted)
			waitFor(t, 5*time.Second, func() bool { return l.Stats().Received.Messages == uint64(rcv.count.Load()) },
				"every message received counted once")
		})
	}
}

// idleClose is a connection's end as the idle test sees it.
type idleClose struct {
	hadData bool
	// silence is the time since its last message, or since it was
	// established (a little less than the watch saw: the watch starts
	// before OnConnectionEstablished runs).
	silence time.Duration
	err     error
}

// arrivalLog keeps when each connection was established and when it last
// delivered a message, and reports every close with the silence before it.
type arrivalLog struct {
	mu     sync.Mutex
	first  time.Time // the first connection's establishment
	last   map[*endpoint.ReceiveEndpoint]time.Time
	data   map[*endpoint.ReceiveEndpoint]bool
	closes chan idleClose
}

// listen starts a listener with IdleTimeout idle whose connections the log
// follows; rcv counts them and delivers their messages.
func (a *arrivalLog) listen(t *testing.T, mgr *domain.Manager, rcv *receiver, idle time.Duration) *endpoint.Listener {
	t.Helper()
	cfg := rcv.config(netio.ReceiveParams{BufferSize: 256, BufferCount: 4})
	cfg.IdleTimeout = idle
	cfg.OnConnectionEstablished = func(ep *endpoint.ReceiveEndpoint) { a.established(ep); rcv.est.Add(1) }
	cfg.OnConnectionClosed = a.closed
	return listen(t, mgr, cfg)
}

// start returns when the first connection was established.
func (a *arrivalLog) start() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.first
}

func newArrivalLog() *arrivalLog {
	return &arrivalLog{last: map[*endpoint.ReceiveEndpoint]time.Time{}, data: map[*endpoint.ReceiveEndpoint]bool{},
		closes: make(chan idleClose, 4)}
}

// established records the start of ep's silence.
func (a *arrivalLog) established(ep *endpoint.ReceiveEndpoint) {
	a.mu.Lock()
	a.last[ep] = time.Now()
	if a.first.IsZero() {
		a.first = a.last[ep]
	}
	a.mu.Unlock()
}

// message records a message of ep. One that the close delivers, read out
// after the idle verdict (the provider placed it between the verdict and
// the close), does not end the silence the verdict saw.
func (a *arrivalLog) message(ep *endpoint.ReceiveEndpoint) {
	if endpoint.ReadingOut(ep) {
		return
	}
	a.mu.Lock()
	a.last[ep], a.data[ep] = time.Now(), true
	a.mu.Unlock()
}

func (a *arrivalLog) closed(ep *endpoint.ReceiveEndpoint, err error) {
	a.mu.Lock()
	c := idleClose{hadData: a.data[ep], silence: time.Since(a.last[ep]), err: err}
	a.mu.Unlock()
	select { // callbacks must not block
	case a.closes <- c:
	default:
	}
}

// TestIdleTimeoutWaitsForALatePoller: a connection whose messages keep
// coming is not closed as idle because its poller was kept from taking
// them for longer than IdleTimeout (here an OnData that blocks once, as a
// loaded machine can stall a poller): the watch's verdict is confirmed on
// the poller, after it read its queue once more. Without that, the
// connection was closed as soon as the poller ran again, right after it
// delivered the message that blocked. A close is judged only where the
// evidence allows: the sender kept sending (no pause of half the timeout),
// and the receiver had delivered a message less than the timeout before
// (a provider's own progress thread stalled by the machine for the
// timeout is a real silence, and so is a first message that never came).
func TestIdleTimeoutWaitsForALatePoller(t *testing.T) {
	const idle = 200 * time.Millisecond
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			mgr := openDomain(t, prov)
			rcv := newReceiver()
			arrivals := newArrivalLog()
			var n atomic.Int64
			rcv.onData = func(ep *endpoint.ReceiveEndpoint, _ []byte) {
				if n.Add(1) == 3 {
					time.Sleep(2 * idle) // the poller, kept from running
				}
				arrivals.message(ep) // when the poller is free again
			}
			l := arrivals.listen(t, mgr, rcv, idle)
			// Enough send buffers for the stall: the provider may complete
			// sends only once the receiver takes them.
			snd := dial(t, mgr, l.Addr(), newSender(64).config(netio.BufferedSendParams{BufferSize: 256, BufferCount: 64}))
			waitFor(t, 5*time.Second, func() bool { return rcv.est.Load() == 1 }, "connection established")

			last := arrivals.start() // when the watch began
			var maxGap time.Duration // between two sends, from the start: the sender's own stalls
			var closed *idleClose
		send:
			for end := time.Now().Add(4 * idle); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				select {
				case c := <-arrivals.closes:
					closed = &c
					break send
				default:
				}
				if buf := snd.GetBuffer(); buf != nil {
					_ = snd.SendBuffer(buf, 8) // a failure is the close, seen above
					now := time.Now()
					maxGap, last = max(maxGap, now.Sub(last)), now
				}
			}
			if closed == nil {
				maxGap = max(maxGap, time.Since(last)) // until the check
				select {
				case c := <-arrivals.closes:
					closed = &c
				default:
				}
			}
			switch {
			case maxGap >= idle/2:
				t.Logf("the sender itself stalled for %v: a close is not judged", maxGap)
			case closed != nil && (!closed.hadData || closed.silence >= idle*3/4):
				t.Logf("nothing arrived for %v before the close (the machine stalled the provider): not judged", closed.silence)
			case closed != nil:
				t.Fatalf("closed as idle %v after a message, while the sender kept sending (its longest pause %v): %v",
					closed.silence, maxGap, closed.err)
			default:
				assert.Greater(t, n.Load(), int64(3), "messages taken after the stalled one")
				assert.Equal(t, uint64(1), l.Stats().Accepted)
			}
		})
	}
}
