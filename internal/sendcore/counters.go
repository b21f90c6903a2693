package sendcore

import (
	"sync/atomic"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/stats"
)

// Counters count what a sender did. They are atomics the data path owns;
// readers take a snapshot without a lock.
type Counters struct {
	sent, bytes, completed, failed, canceled atomic.Uint64
}

// Snapshot is a reading of Counters.
type Snapshot struct {
	Sent      uint64 // messages posted, or queued for the poller to post
	Bytes     uint64 // bytes posted
	Completed uint64 // sends completed OK
	Failed    uint64 // sends that completed with an error
	Canceled  uint64 // sends reported Canceled: pending when the endpoint ended
}

// Posted counts a send of n bytes. Core.Send does, for the kinds that post
// through the core; the listen side's replies (endpoint/replies_listen.go)
// post themselves and count themselves. The rule: count a send before
// anything can report it finished, so that Completed never passes Sent.
// That is before the post, as the completion may come at once, except for
// a send posted on the goroutine that reports its completion, which may be
// counted after its post (Core.Send's PostOnPoller case; not a send whose
// post itself reports it, Options.ReportedAtPost).
func (c *Counters) Posted(n int) {
	c.sent.Add(1)
	c.bytes.Add(uint64(n))
}

// Unposted takes back a count for a post the provider refused.
func (c *Counters) Unposted(n int) {
	c.sent.Add(^uint64(0))
	c.bytes.Add(^uint64(n - 1))
}

// Finished counts n sends that ended with st.
func (c *Counters) Finished(st netio.Status, n int) {
	switch st {
	case netio.OK:
		c.completed.Add(uint64(n))
	case netio.Canceled:
		c.canceled.Add(uint64(n))
	default:
		c.failed.Add(uint64(n))
	}
}

// Read reads the finished counters first: every send is counted in Sent
// before anything can report it finished (see Posted), so a Sent read
// after them covers every send they count, and the snapshot never shows
// more finished than sent.
func (c *Counters) Read() Snapshot {
	completed, failed, canceled := c.completed.Load(), c.failed.Load(), c.canceled.Load()
	return Snapshot{Sent: c.sent.Load(), Bytes: c.bytes.Load(), Completed: completed, Failed: failed, Canceled: canceled}
}

// Fill puts a reading into an endpoint's record: the counters, and the
// sends pending (sent and not finished).
func (c *Counters) Fill(e *stats.Endpoint) {
	s := c.Read()
	e.MessagesSent, e.BytesSent = s.Sent, s.Bytes
	e.SendsCompleted, e.SendsFailed, e.SendsCanceled = s.Completed, s.Failed, s.Canceled
	if finished := s.Completed + s.Failed + s.Canceled; s.Sent > finished {
		e.PendingSends = int(s.Sent - finished)
	}
}

// Progress reports whether sends are pending and how many have finished,
// for the progress watchdog.
func (c *Counters) Progress() (pending bool, finished uint64) {
	finished = c.completed.Load() + c.failed.Load() + c.canceled.Load()
	return c.sent.Load() > finished, finished
}
