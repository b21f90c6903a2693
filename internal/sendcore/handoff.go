package sendcore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/backoff"
	"github.com/netio-go/netio/internal/poll"
)

// HandOffSize is the message size from which a sender has its poller
// goroutine post a send instead of the goroutine that called the send.
//
// Why: libfabric's tcp provider posts a send and progresses the endpoint's
// completion queue under one lock, and while it holds that lock it copies
// into the socket as much as the socket takes (up to megabytes). A post
// from the application goroutine then waits inside a cgo call for the
// poller's copy, and after 20 µs the Go runtime hands that goroutine's
// processor to another thread: a thread switch per large send. Posting
// from the poller goroutine, which holds the lock anyway, costs a queue
// entry and at most one wake-up per batch instead. Below this size the
// copies are short and posting from the caller is faster than the
// hand-off's wake-up. docs/performance.md has the measurements.
const HandOffSize = 256 << 10

// queuedSend is a send waiting for the poller goroutine to post it: the
// endpoint kind's key for it (a buffer ID, a header slot) and a length (the
// message's bytes, the slot's iovecs).
type queuedSend struct {
	key uint32
	n   int
}

// handOff is the FIFO of sends an endpoint hands to its poller goroutine.
// Producers are the goroutines calling SendBuffer; the one consumer is the
// poller goroutine. An entry stays queued until it has been posted, so a
// later send of the same goroutine, seeing the queue non-empty, queues
// behind it instead of overtaking it.
type handOff struct {
	mu        sync.Mutex
	ring      []queuedSend // capacity: every buffer the endpoint can post
	head      int
	n         atomic.Int32 // entries queued; read without mu by post
	scheduled bool         // a drain is queued on the poller, or running, or stalled
	// stalled: the provider's transmit queue was full; the next completion
	// (or the retry timer, HandOffRetry) drains again.
	stalled atomic.Bool
	// wait is the wait before the timer's retry of a stalled drain,
	// timerDrain says that the drain running is that retry, and since is
	// when the provider began refusing the queue's head without a break
	// (zero once it takes a post); all are the poller goroutine's.
	wait       backoff.Doubling
	timerDrain bool
	since      time.Time
}

// HandOffRetry is how long a stalled drain first waits for a completion
// before it tries again anyway: a full transmit queue means sends are in
// flight, so a completion normally comes first; the timer covers a
// refusal no completion ends: the inject bound (ConfirmInjects), which
// refuses until the provider has sent enough while the sends it holds
// complete nothing, or EINTR. Once the stall has lasted handOffRetryMax,
// each of the timer's own retries refused again doubles the wait, up to
// handOffRetryMax, and a post taken brings it back to HandOffRetry
// (backoff.Doubling.RefusedFor).
const HandOffRetry = time.Millisecond

// handOffRetryMax caps the wait between the timer's retries of a stalled
// drain. Why back off: a tcp receiver that stops reading, with an inject
// queued behind a large send at the inject bound, stalled the drain with
// nothing to complete for as long as it stopped; retried every
// millisecond, each retry cost a timer, a poller wake-up and a counter
// read (figures: docs/performance.md, hack/retrycost). Why this cap: it bounds how late the queue
// moves on once the provider would take the send again with nothing else
// to announce it (a completion drains it at once); ReconnectingSender's
// and rdm's lanes use the same. A stall shorter than it keeps the timer's
// retry every HandOffRetry: a refusal that ends without a completion (the
// inject bound, shm's peer queue full) is then noticed as promptly as
// before.
const handOffRetryMax = 64 * time.Millisecond

// init sizes the ring for capacity sends in flight: a buffer is queued at
// most once at a time, so the ring never overflows.
func (h *handOff) init(capacity int) { h.ring = make([]queuedSend, capacity) }

// HandOffBusy reports whether sends wait for the poller goroutine.
func (c *Core) HandOffBusy() bool { return c.hand.busy() }

// PostFunc posts one send of a kind by key and length (see Send).
type PostFunc = func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno

// PostFunc returns the kind's post, for a test to wrap.
func (c *Core) PostFunc() PostFunc { return c.postSend }

// SetPostFunc replaces the kind's post and turns runs off (RunPoster), so
// that every queued send goes through post; tests put a fault between the
// core and the provider with it.
func (c *Core) SetPostFunc(post PostFunc) { c.postSend, c.runner = post, nil }

// RunPoster is a Kind that posts a run of queued sends in one provider
// call (rdm's injects: one cgo call for many fi_inject). PostRun posts the
// leading sends of keys (lengths ns) that it can post as a run, in order,
// and returns how many it posted, each as the kind's post would have (0:
// the first is posted alone, by the kind's post), and the errno of the
// provider's refusal that stopped it, if one did. After a temporary
// refusal the drain posts the refused send alone next, so that it is
// offered to the provider twice at most. It runs on the poller
// goroutine with the post guard held. Joins says whether the send with
// key next may follow the one with key prev in a run; it is asked with
// the hand-off queue's lock held, so it must be cheap and take no lock
// the queue's producers hold: the core hands PostRun only sends that
// join, and posts a send alone without asking PostRun when the next one
// does not join it.
type RunPoster interface {
	PostRun(ep *fabric.Endpoint, keys []uint32, ns []int) (int, fabric.Errno)
	Joins(prev, next uint32) bool
}

// RunMax is the most queued sends drainHandOff hands a RunPoster at once
// (the size of a RunPoster's scratch).
const RunMax = 32

// postRun posts a run of no more than most queued sends through the kind's
// PostRun and returns how many it posted and the errno that stopped it.
func (c *Core) postRun(ep *fabric.Endpoint, most int) (int, fabric.Errno) {
	k := c.hand.peekRun(c.runKeys[:min(most, RunMax)], c.runNs[:], c.runner)
	if k < 2 {
		return 0, 0
	}
	d, errno := c.runner.PostRun(ep, c.runKeys[:k], c.runNs[:k])
	return min(max(d, 0), k), errno // no more than it was handed
}

// runPoster returns the kind as a RunPoster when the drain may hand it
// runs: PostRun does the kind's own accounting, not the core's inject
// path (Options.Inject) nor its count of what the provider holds
// (ConfirmInjects), so only for a core with neither. InitHandOff,
// InitInject and ConfirmInjects ask it, in whatever order a kind calls
// them.
func (c *Core) runPoster() RunPoster {
	if c.inj.post != nil || c.conf.cntr != nil {
		return nil
	}
	r, _ := c.kind.(RunPoster)
	return r
}

// busy reports whether sends are queued.
func (h *handOff) busy() bool { return h.n.Load() > 0 }

// push queues a send and reports whether the caller must schedule a drain.
// It reports false, queuing nothing, if the ring is full, which a caller
// that queues only buffers it marked posted never sees.
func (h *handOff) push(key uint32, n int) (queued, schedule bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := int(h.n.Load())
	if k == len(h.ring) {
		return false, false
	}
	h.ring[(h.head+k)%len(h.ring)] = queuedSend{key, n}
	h.n.Add(1)
	schedule = !h.scheduled
	h.scheduled = true
	return true, schedule
}

// peek returns the oldest send; ok is false when none is queued, and the
// drain then counts as finished.
func (h *handOff) peek() (s queuedSend, ok bool) {
	s, _, ok = h.peekFor(nil)
	return s, ok
}

// peekFor is peek, and says whether the next oldest send joins the oldest
// in a run of r (nil: no run).
func (h *handOff) peekFor(r RunPoster) (s queuedSend, run, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n.Load() == 0 {
		h.scheduled = false
		return queuedSend{}, false, false
	}
	s = h.ring[h.head]
	run = r != nil && h.n.Load() > 1 && r.Joins(s.key, h.ring[(h.head+1)%len(h.ring)].key)
	return s, run, true
}

// peekRun copies up to len(keys) of the oldest sends into keys and ns,
// while each joins the one before it in a run of r, and returns how many.
func (h *handOff) peekRun(keys []uint32, ns []int, r RunPoster) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(int(h.n.Load()), len(keys), len(ns))
	for i := range k {
		q := h.ring[(h.head+i)%len(h.ring)]
		if i > 0 && !r.Joins(keys[i-1], q.key) {
			return i
		}
		keys[i], ns[i] = q.key, q.n
	}
	return k
}

// popRun removes the k oldest sends, once posted.
func (h *handOff) popRun(k int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k = min(k, int(h.n.Load()))
	clear(h.ring[h.head:min(h.head+k, len(h.ring))])
	if h.head+k > len(h.ring) {
		clear(h.ring[:h.head+k-len(h.ring)])
	}
	h.head = (h.head + k) % len(h.ring)
	h.n.Add(-int32(k))
}

// pop removes the oldest send, once it has been posted (or failed). After
// a reset (the endpoint closed meanwhile) there is nothing to remove.
func (h *handOff) pop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n.Load() == 0 {
		return
	}
	h.ring[h.head] = queuedSend{}
	h.head = (h.head + 1) % len(h.ring)
	h.n.Add(-1)
}

// reset drops every queued send: the endpoint has closed and reports them
// as canceled with the rest of its pending sends.
func (h *handOff) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.ring)
	h.head, h.scheduled = 0, false
	h.n.Store(0)
	h.stalled.Store(false)
}

// InitHandOff sizes the hand-off queue for capacity sends in flight, and
// sets post, which posts the send with a key and length (see send). The
// kind calls it from prepare.
func (c *Core) InitHandOff(capacity int, post func(ep *fabric.Endpoint, key uint32, n int) fabric.Errno) {
	c.hand.init(capacity)
	c.postSend = post
	c.runner = c.runPoster()
	c.drainFn = c.drainHandOff
	c.hand.wait = backoff.New(HandOffRetry, handOffRetryMax)
	timerDrain := c.drainFromTimer // bound once
	c.handOffTimer = time.AfterFunc(time.Hour, func() { c.Poller.Go(timerDrain) })
	c.handOffTimer.Stop()
}

// drainFromTimer is the retry timer's drain of a stalled queue: refused
// again before it posted anything, it doubles the wait before the next.
func (c *Core) drainFromTimer() {
	c.hand.timerDrain = true
	c.drainHandOff()
}

// handOffDue reports whether a send of size bytes goes through the poller
// goroutine: any one behind a queued send, which it must not overtake;
// else a large one, or with PostOnPoller any one not made on the poller
// goroutine itself. One made there (a callback, say OnData sending a
// reply) is posted at once, which is what the drain would do later, after
// the rest of the batch, a receive's repost and a trip through the run
// queue: about 0.15 µs of a 0.5 µs hop on shm (docs/performance.md, "rdm
// 64 B latency"). That takes asking OnPollerGoroutine on every send, which
// is done only where it costs a few nanoseconds (poll.FastGoroutineID);
// elsewhere every PostOnPoller send is queued, the microsecond of a stack
// read being more than the direct post saves.
func (c *Core) handOffDue(size int) bool {
	if c.hand.busy() {
		return true
	}
	if !c.opts.PostOnPoller {
		return size >= HandOffSize
	}
	return !c.postDirect || !c.Poller.OnPollerGoroutine()
}

// SetPostDirect sets whether a PostOnPoller send made on the poller
// goroutine is posted at once (see handOffDue); Attach sets it to
// poll.FastGoroutineID. Tests clear it to take the path of a build where
// the goroutine ID is read slowly.
func (c *Core) SetPostDirect(on bool) { c.postDirect = on && c.opts.PostOnPoller }

// Send posts the send with this key and length, of size bytes, which the
// kind has marked posted (so that teardown cancels it) while holding the
// post guard with ep: at once, or through the poller goroutine when
// handOffDue(size). It counts the send in Counters (Posted), so that
// Completed never passes Sent (see send). A status other than OK means
// nothing was posted, queued or counted, and the kind takes its marking
// back. A full queue is NoResources, which a kind that sizes it for every
// send it can have in flight never sees.
func (c *Core) Send(ep *fabric.Endpoint, key uint32, n, size int) netio.Status {
	return c.send(ep, key, n, size, false)
}

// SendRegular is Send with a regular post, never an inject, when the send
// is posted at once: it is not refused for the inject bound
// (ConfirmInjects), which no retry would pass for a send made as the
// endpoint closes, and it holds its buffer until its completion, so it
// cannot add to what the provider holds beyond that buffer. A send it
// queues behind others is posted as every queued send is.
func (c *Core) SendRegular(ep *fabric.Endpoint, key uint32, n, size int) netio.Status {
	return c.send(ep, key, n, size, true)
}

// send is Send, with a regular post at once when regular.
//
// A send is counted before it is posted or queued: once posted, its
// completion may be reported at once on the poller goroutine, and
// Completed must never pass Sent. One exception: with PostOnPoller, a send
// posted at once is posted on the poller goroutine, the goroutine that
// reports completions and injects, so nothing reports it before this
// returns (unless the kind's post does, Options.ReportedAtPost), and it is
// counted after the post. That keeps the count's two locked adds off a
// reply's way to the provider (docs/performance.md, "shm 64 B latency: the
// read-to-send span").
func (c *Core) send(ep *fabric.Endpoint, key uint32, n, size int, regular bool) netio.Status {
	if !c.handOffDue(size) {
		after := c.opts.PostOnPoller && key&c.opts.ReportedAtPost == 0
		if !after {
			c.Counters.Posted(size)
		}
		var errno fabric.Errno
		if regular {
			errno = c.postRegular(ep, key, n)
		} else {
			errno = c.post(ep, key, n)
		}
		switch {
		case errno != 0 && !after:
			c.Counters.Unposted(size)
		case errno == 0 && after:
			c.Counters.Posted(size)
		}
		if errno != 0 {
			return PostStatus(errno)
		}
		return netio.OK
	}
	c.Counters.Posted(size)
	queued, schedule := c.hand.push(key, n)
	if !queued {
		c.Counters.Unposted(size)
		return netio.NoResources
	}
	if schedule {
		c.scheduleDrain()
	}
	return netio.OK
}

// scheduleDrain has the poller goroutine post what is queued. A poller
// that has stopped (a shared one closed before the endpoint) refuses: the
// sends stay queued until the endpoint's Close cancels them, as sends
// posted to a provider that nobody progresses would wait.
func (c *Core) scheduleDrain() { c.Poller.Go(c.drainFn) }

// drainHandOff posts the queued sends in order. A full transmit queue
// leaves the rest queued, stalled until the next completion (see
// AfterCompletion) or the retry timer (HandOffRetry, backing off to
// handOffRetryMax: see stall); a post the provider refuses is
// reported as the kind reports an error completion. It runs on the poller
// goroutine.
//
// One drain posts at most the sends queued when it began, then queues
// itself on the poller again: posts that free their slot at once (an
// inject, a send refused or parked by the kind) let producers keep the
// queue non-empty for ever, and a drain that ran until it was empty would
// starve the poller's completions and every other endpoint's work (Do).
func (c *Core) drainHandOff() {
	c.hand.stalled.Store(false)
	timer, took := c.hand.timerDrain, false // took: the provider took a post of this drain
	c.hand.timerDrain = false
	single := false // the oldest was refused for now in a run: post it alone
	for budget := c.hand.n.Load(); ; budget-- {
		if budget <= 0 {
			if c.hand.busy() {
				c.scheduleDrain() // still scheduled: the next drain goes on
				return
			}
		}
		q, run, ok := c.hand.peekFor(c.runner)
		if !ok {
			return
		}
		ep, open := c.Guard.Acquire()
		if !open {
			return // closing: teardown cancels what is queued
		}
		if run && budget > 1 && !single {
			if d, errno := c.postRun(ep, int(budget)); d > 0 {
				c.Guard.Release()
				c.hand.popRun(d)
				took = true
				c.hand.progressed()
				budget -= int32(d - 1)
				single = errno.Temporary()
				continue
			}
		}
		single = false
		errno := c.post(ep, q.key, q.n)
		c.Guard.Release()
		if errno.Temporary() {
			c.stall(timer && !took)
			return
		}
		c.hand.pop()
		c.hand.progressed() // taken or failed: the provider refuses this head no longer
		if errno == 0 {
			took = true
		} else {
			c.conf.refused()
			c.kind.HandleCompletion(q.key, poll.Result{Status: netio.Failed, Errno: errno})
		}
	}
}

// progressed notes that the provider took a post: the stall, if any, is
// over and the timer's next wait is the first.
func (h *handOff) progressed() {
	h.wait.Reset()
	h.since = time.Time{}
}

// stall leaves the queue stalled until the next completion or the retry
// timer, whose wait doubles first when again (its own retry was refused
// before the provider took anything) and the stall has lasted
// handOffRetryMax. The timer is armed anew, pushed out by a completion's
// refused drain too: a completion means sends are in flight, whose
// completions come sooner.
func (c *Core) stall(again bool) {
	c.hand.stalled.Store(true)
	now := time.Now()
	if c.hand.since.IsZero() {
		c.hand.since = now
	}
	if again {
		c.hand.wait.RefusedFor(now.Sub(c.hand.since))
	}
	c.handOffTimer.Reset(c.hand.wait.Wait())
}

// AfterCompletion drains a stalled hand-off queue: a completion has freed a
// place in the provider's transmit queue. It runs on the poller goroutine,
// after every completion, so it costs one atomic load when nothing stalled.
func (c *Core) AfterCompletion() {
	if c.hand.stalled.Load() {
		c.drainHandOff()
	}
}
