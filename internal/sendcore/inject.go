package sendcore

import (
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// injector is the core's inject path (Options.Inject): a send of at most
// the provider's inject_size bytes is posted as an inject (the kind's
// post: fi_inject, or fi_sendmsg with FI_INJECT when a send counter
// confirms it, see ConfirmInjects), which copies it before it returns and
// writes no completion. The send's table entry
// is claimed at once, so its buffer is free again when the send returns,
// and its key waits in a report queue until the poller goroutine reports
// it (OnSendCompleted runs there, as for every completion, never on the
// goroutine that called the send), once, in the order of the injects.
//
// Why: on tcp in libfabric 1.17 a send's completion costs the sender a CQ
// write, a CQ read and a callback; an inject costs none of them, and a
// sender that finds its buffer free at once need not wait for the poller,
// which then reports many keys per wake-up. docs/performance.md has the
// measurements.
type injector struct {
	size  int      // largest message injected: the provider's inject_size
	post  PostFunc // the kind's inject of key's first n bytes; nil: off
	table Table    // the kind's table of sends in flight
	done  reports  // claimed keys the poller goroutine reports
	// batch is the reports being made and next the first not yet made;
	// poller goroutine only (Do and AtStop keep a stopped poller's callers
	// from running beside it).
	batch    []report
	next     int
	reportFn func() // reportInjected, bound once so that scheduling it does not allocate
}

// report is an injected send to report: its table entry and its key.
type report struct {
	id  uint32
	key uint64
}

// reports is the FIFO of injected sends waiting for their report.
// Producers are the goroutines that inject; the one consumer is the
// poller goroutine. used counts entries and places reserved by an inject
// in progress, so that an inject that found a place always has it.
type reports struct {
	mu        sync.Mutex
	ring      []report
	head, n   int
	scheduled bool // a report is queued on the poller, or running
	used      atomic.Int32
}

// reserve takes a place for one report, or reports false when the queue
// is full.
func (q *reports) reserve() bool {
	if q.used.Add(1) > int32(len(q.ring)) {
		q.used.Add(-1)
		return false
	}
	return true
}

// unreserve gives back a place reserve took and push did not fill.
func (q *reports) unreserve() { q.used.Add(-1) }

// push queues a report into a reserved place and reports whether the
// caller must schedule the poller's report.
func (q *reports) push(r report) (schedule bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ring[(q.head+q.n)%len(q.ring)] = r
	q.n++
	schedule = !q.scheduled
	q.scheduled = true
	return schedule
}

// takeAll appends every queued report to dst, empties the queue, and ends
// the scheduled report: the next push schedules another.
func (q *reports) takeAll(dst []report) []report {
	q.mu.Lock()
	defer q.mu.Unlock()
	for ; q.n > 0; q.n-- {
		dst = append(dst, q.ring[q.head])
		q.head = (q.head + 1) % len(q.ring)
	}
	q.used.Add(-int32(len(dst)))
	q.scheduled = false
	return dst
}

// InjectQueueFactor sizes the report queue: this many reports per send
// the kind can have in flight (16 bytes each). A full queue makes a send
// take the regular post, with a provider completion, until the poller has
// reported. The price is 16 bytes a report of memory per buffer; a
// smaller factor sent many sends the regular way while the poller was
// descheduled (docs/performance.md).
const InjectQueueFactor = 16

// InitInject gives the core the kind's inject post, for Options.Inject: a
// send of at most SetInjectSize bytes is posted with it instead of the
// post InitHandOff set, and claimed from table at once. capacity is every
// send the kind can have in flight. Only kinds whose post length n is the
// message's size in bytes (buffered sends) may call it. Without
// Options.Inject it does nothing.
func (c *Core) InitInject(capacity int, table Table, post PostFunc) {
	if !c.opts.Inject {
		return
	}
	n := max(InjectQueueFactor*capacity, 1)
	c.inj.done.ring = make([]report, n)
	c.inj.batch = make([]report, 0, n)
	c.inj.table, c.inj.post = table, post
	c.inj.reportFn = c.reportInjected
	c.runner = c.runPoster() // none with the core's inject path
}

// SetInjectSize sets the largest message injected: the provider's
// inject_size (fi_info tx_attr), read by the opener once it has the
// provider's info. 0, a provider that injects nothing, leaves every send
// on the regular post.
func (c *Core) SetInjectSize(size int) { c.inj.size = size }

// InjectSize returns the largest message injected, 0 when the kind
// injects none.
func (c *Core) InjectSize() int {
	if c.inj.post == nil {
		return 0
	}
	return max(c.inj.size, 0)
}

// post posts the send with this key and length: injected when the kind
// injects messages of n bytes and the report queue has a place, otherwise
// with the kind's post. It runs on the caller's goroutine or, for a
// queued send, on the poller goroutine, holding the post guard.
func (c *Core) post(ep *fabric.Endpoint, id uint32, n int) fabric.Errno {
	if n > c.InjectSize() || c.inj.post == nil || !c.inj.done.reserve() {
		return c.postRegular(ep, id, n)
	}
	if c.conf.full() { // the provider holds enough: NoResources (ConfirmInjects)
		c.inj.done.unreserve()
		return fabric.EAGAIN
	}
	if errno := c.inj.post(ep, id, n); errno != 0 {
		c.inj.done.unreserve()
		return errno
	}
	c.conf.tookSend(false)
	key, ok := c.inj.table.Claim(id)
	if !ok { // cannot happen: the kind marked it posted, and nothing else claims it
		c.inj.done.unreserve()
		c.Log.Error().Uint32("id", id).Msg("sendcore: an injected send was claimed by another path; its key is not reported here")
		return 0
	}
	if c.inj.done.push(report{id, key}) {
		// A poller that has stopped refuses: the report stays queued
		// until the endpoint's teardown makes it.
		c.Poller.Go(c.inj.reportFn)
	}
	return 0
}

// postRegular posts the send with this key and length with the kind's
// post, which asks for a completion, and counts it taken.
func (c *Core) postRegular(ep *fabric.Endpoint, id uint32, n int) fabric.Errno {
	errno := c.postSend(ep, id, n)
	if errno == 0 {
		c.conf.tookSend(true)
	}
	return errno
}

// InjectFunc returns the kind's inject post, for a test to wrap.
func (c *Core) InjectFunc() PostFunc { return c.inj.post }

// SetInjectFunc replaces the kind's inject post; tests put a fault
// between the core and the provider with it.
func (c *Core) SetInjectFunc(post PostFunc) { c.inj.post = post }

// reportInjected reports every injected send queued so far as completed
// OK: the provider has its copy. It runs on the poller goroutine. A
// callback that closes the endpoint calls it again, from Teardown: that
// call first makes the rest of this batch's reports, in order, then the
// newer ones, so that every key is reported before OnConnectionClosed, and
// this call finds nothing left.
func (c *Core) reportInjected() {
	c.reportRest()
	clear(c.inj.batch)
	c.inj.batch = c.inj.done.takeAll(c.inj.batch[:0])
	c.inj.next = 0
	if n := len(c.inj.batch); n > 0 {
		c.Counters.Finished(netio.OK, n)
		c.reportRest()
	}
}

// reportRest makes the reports of the batch not yet made, in order.
func (c *Core) reportRest() {
	for c.inj.next < len(c.inj.batch) {
		r := c.inj.batch[c.inj.next]
		c.inj.next++
		if cb := c.reportTo(c.inj.table, r.id); cb != nil {
			cb(r.key, netio.OK)
		}
	}
}

// endInjects reports what was injected before the endpoint closed, as
// completed OK: the provider took each before the close. It runs on the
// poller goroutine after the endpoint closed, so that no inject is in
// progress, and before teardown cancels the rest.
func (c *Core) endInjects() {
	if c.inj.post != nil {
		c.reportInjected()
	}
}
