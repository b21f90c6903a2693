package sendcore

import (
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/fabric"
)

// DefaultInjectLinger is how long Close waits for the provider to send
// the injects it took when the kind gives no linger of its own.
const DefaultInjectLinger = time.Second

// lingerPoll is how often Close reads the counter while it waits.
const lingerPoll = time.Millisecond

// DefaultMaxHeld is how many sends the provider may hold unsent before an
// inject is refused, when the kind gives no bound of its own (see
// ConfirmInjects). The trade-off: a larger bound rides out a longer pause
// of the peer without a refusal, a smaller one bounds the memory a stalled
// peer leaves in the provider (at most this many inject_size copies, on a
// provider such as tcp that has no limit of its own: docs/providers.md).
const DefaultMaxHeld = 4096

// confirmer tells the injects a provider has sent from those it may still
// hold (ConfirmInjects). An inject returns once the provider has copied
// the message, and the core reports its key OK at once; but the provider
// keeps it queued while the peer's socket is full, and fi_close discards
// that queue: tcp in libfabric 1.17 lost 1,035 to 3,280 48-byte injects
// reported OK per run of endpoint's TestCloseWaitsForInjects without
// this. A send counter bound to the endpoint counts every send
// that has left the provider, injects included when posted with
// fabric.Endpoint.InjectCounted (tcp counts no fi_inject), and errors
// apart; posted counts every send the provider took. Close waits (up to
// linger) until the two agree, so that nothing the provider holds is
// discarded; what is still held when the endpoint ends is counted in
// unconfirmed and logged. Sends are queued in the order they are posted
// (a connection is one FIFO), so the regular sends still pending are part
// of what the provider holds, and are not counted: they are reported
// Canceled.
type confirmer struct {
	cntr   *fabric.Counter // nil: the kind does not confirm its injects
	linger time.Duration

	posted  atomic.Uint64 // sends the provider took: injects and regular
	regular atomic.Int64  // regular sends taken and not yet completed
	// flushed counts the regular sends that completed FI_ECANCELED: tcp
	// flushes its queues on a broken connection with such a completion
	// for each, and counts none of them in the counter, not even as errors.
	flushed atomic.Uint64
	// maxHeld bounds the sends the provider holds unsent: an inject that
	// would make it hold more is refused for now (full). seen is the
	// counter's last reading (sent), so that posted - seen, an upper
	// bound of what it holds, is known without a call.
	maxHeld uint64
	seen    atomic.Uint64
}

// ConfirmInjects has the core confirm its injects with cntr, a counter
// bound to the endpoint's sends (see confirmer), and Close wait up to
// linger (DefaultInjectLinger when 0) for them. An inject is refused for
// now (EAGAIN: NoResources from a direct post, a stalled hand-off queue
// otherwise) while the provider holds maxHeld sends unsent, injects and
// regular ones (DefaultMaxHeld when 0): it queues every inject a stalled
// peer leaves, without a limit of its own. The kind posts injects with
// fabric.Endpoint.InjectCounted and its other sends so that they complete
// (fabric.BindSelective). Call it before the first send.
func (c *Core) ConfirmInjects(cntr *fabric.Counter, linger time.Duration, maxHeld int) {
	if linger == 0 {
		linger = DefaultInjectLinger
	}
	if maxHeld <= 0 {
		maxHeld = DefaultMaxHeld
	}
	c.conf.cntr, c.conf.linger, c.conf.maxHeld = cntr, linger, uint64(maxHeld)
	c.runner = c.runPoster() // none with a count of what the provider holds
}

// InjectsUnconfirmed returns how many injects reported OK the provider
// may not have sent: those it still held when the endpoint ended (see
// ConfirmInjects), and whatever else the kind counted (CountUnconfirmed).
// They may not have reached the peer.
func (c *Core) InjectsUnconfirmed() uint64 { return c.unconfirmed.Load() }

// CountUnconfirmed adds n injects reported OK that nothing confirmed sent
// to InjectsUnconfirmed, the one count of them every kind adds to: the
// core's at close (ConfirmInjects), rdm's per peer (its tracked sends).
// Safe on any goroutine.
func (c *Core) CountUnconfirmed(n uint64) { c.unconfirmed.Add(n) }

// tookSend counts a send the provider took; regular says it has a
// completion to come.
func (f *confirmer) tookSend(regular bool) {
	if f.cntr == nil {
		return
	}
	if regular {
		f.regular.Add(1)
	}
	f.posted.Add(1)
}

// refused counts a send the provider refused that is reported as a
// failed completion (a hand-off post, drainHandOff): Complete counts it
// completed, so it is counted pending first, or the count of regular sends
// pending would drift below the truth by one per refusal.
func (f *confirmer) refused() {
	if f.cntr != nil {
		f.regular.Add(1)
	}
}

// completed counts the completion of a regular send, with errno its
// error: one the provider canceled (flushed) will never be counted sent.
func (f *confirmer) completed(errno fabric.Errno) {
	if f.cntr == nil {
		return
	}
	f.regular.Add(-1)
	if errno == fabric.ECANCELED {
		f.flushed.Add(1)
	}
}

// held returns how many of the sends the provider took it has not sent
// yet, nor flushed with a completion; it reads the counter first, so that a send counted in posted after
// the reading is held, never sent twice.
func (f *confirmer) held() uint64 {
	sent := f.sent()
	if posted := f.posted.Load(); posted > sent {
		return posted - sent
	}
	return 0
}

// sent reads how many of the sends the provider took it has sent or
// flushed: the counter, its errors, and the flushed completions.
func (f *confirmer) sent() uint64 {
	return f.cntr.Read() + f.cntr.ReadErr() + f.flushed.Load()
}

// full reports whether the provider holds maxHeld sends unsent, so that
// the next inject is refused for now. posted - seen is never less than
// what it holds (seen only lags the counter), so the counter is read only
// when that estimate reaches the bound: the fast path is two atomic loads.
// Senders racing past the check together may each post one more: the
// provider then holds up to maxHeld - 1 + the number of such senders.
// Without a counter (the kind does not confirm) nothing is bounded.
func (f *confirmer) full() bool {
	if f.cntr == nil {
		return false
	}
	if posted, seen := f.posted.Load(), f.seen.Load(); posted < seen+f.maxHeld {
		return false
	}
	sent := f.sent()
	f.seen.Store(sent) // a racing older reading may overwrite it: then the next inject reads again
	return f.posted.Load() >= sent+f.maxHeld
}

// waitSent waits until the provider holds no send, for at most the
// linger. It runs on the goroutine calling Close, never on the poller
// goroutine: the poller must go on reading the queues, which makes the
// provider's progress. A Close from a callback does not wait.
func (c *Core) waitSent() {
	f := &c.conf
	if f.cntr == nil || c.ended.Load() || c.Poller == nil || c.Poller.OnPollerGoroutine() {
		return
	}
	deadline := time.Now().Add(f.linger)
	for c.heldOpen() > 0 && time.Now().Before(deadline) {
		time.Sleep(lingerPoll)
	}
}

// SendsHeld returns how many sends the provider holds unsent, injects
// and regular ones, as the send counter tells (see ConfirmInjects): 0
// without a counter, or once the endpoint has closed.
func (c *Core) SendsHeld() uint64 {
	if c.conf.cntr == nil {
		return 0
	}
	return c.heldOpen()
}

// heldOpen is held while the endpoint is open, 0 once it has closed (the
// counter closes with it). It holds the guard only for the reading, so
// that a teardown on the poller goroutine never waits out the linger.
func (c *Core) heldOpen() uint64 {
	if _, ok := c.Guard.Acquire(); !ok {
		return 0
	}
	defer c.Guard.Release()
	return c.conf.held()
}

// countUnconfirmed counts the injects the provider still holds as the
// endpoint closes: what it holds less the regular sends pending, which are
// reported Canceled. It runs on the poller goroutine inside the guard's
// exclusive section, just before the endpoint closes (CloseEndpoint), so
// it reads the counter directly: heldOpen's shared lock would deadlock. A
// regular send that has completed but whose completion the poller has not
// read yet is taken for pending, so the count may fall short by those: in
// a Close the poller has read the queue just before (Do runs after a
// read), unless a send posted meanwhile completed.
func (c *Core) countUnconfirmed() {
	f := &c.conf
	if f.cntr == nil {
		return
	}
	held := int64(f.held()) - max(f.regular.Load(), 0)
	if held <= 0 {
		return
	}
	c.CountUnconfirmed(uint64(held))
	c.Log.Warn().Str("peer", c.opts.Peer).Int64("injects", held).
		Msg("closing with injects the provider has not sent: they were reported OK and may not arrive")
}
