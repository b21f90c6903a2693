package sendcore

import (
	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/poll"
)

// Table is a kind's table of operations in flight, by key: send buffers
// or header slots, each a slot of an internal/slots.Set.
type Table interface {
	// Claim takes a posted operation back from the provider, once: it
	// lets go of what the operation held and returns the key to report.
	// Every later Claim of the same operation reports false.
	Claim(id uint32) (key uint64, ok bool)
	// Pending appends the operations in flight to dst.
	Pending(dst []uint32) []uint32
}

// Router is a Table whose operations are reported to callbacks of their
// own, chosen by id, instead of Options.OnSendCompleted: a connectionless
// endpoint keeps its buffered sends, zero-copy sends and injects in one
// table (told apart by marks in the id) and reports each kind's keys to
// that kind's callback.
type Router interface {
	Table
	// ReportTo returns the callback for operation id; nil reports nothing.
	ReportTo(id uint32) func(key uint64, st netio.Status)
}

// reportTo is the callback of operation id of t.
func (c *Core) reportTo(t Table, id uint32) func(key uint64, st netio.Status) {
	if r, ok := t.(Router); ok {
		return r.ReportTo(id)
	}
	return c.opts.OnSendCompleted
}

// Complete reports the operation id of t once: counted, logged when it
// failed, and passed to OnSendCompleted. A second completion, or one that
// CancelAll reported already, does nothing.
func (c *Core) Complete(t Table, id uint32, r poll.Result) {
	key, ok := t.Claim(id)
	if !ok {
		return
	}
	c.conf.completed(r.Errno)
	c.Counters.Finished(r.Status, 1)
	if r.Status != netio.OK {
		c.Log.Warn().Uint64("key", key).Stringer("status", r.Status).Err(r.Errno).Msg("send failed")
	}
	if cb := c.reportTo(t, id); cb != nil {
		cb(key, r.Status)
	}
}

// CancelAll claims every operation in flight first, then reports each as
// Canceled: a callback that calls Close finds the table empty. The
// endpoint is closed, so the provider holds none of them.
func (c *Core) CancelAll(t Table) {
	pending := t.Pending(nil)
	claimed := pending[:0]
	keys := make([]uint64, 0, len(pending))
	for _, id := range pending {
		if key, ok := t.Claim(id); ok {
			claimed = append(claimed, id)
			keys = append(keys, key)
		}
	}
	c.Counters.Finished(netio.Canceled, len(keys))
	for i, k := range keys {
		if cb := c.reportTo(t, claimed[i]); cb != nil {
			cb(k, netio.Canceled)
		}
	}
}
