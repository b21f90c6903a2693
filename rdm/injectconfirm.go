package rdm

import (
	"sync/atomic"
	"time"
)

// DefaultInjectLinger is how long Close waits for taken injects to be
// confirmed when Config.InjectLinger is 0.
const DefaultInjectLinger = time.Second

// trackEvery bounds the untracked injects to one peer in a row: the next
// asks for a completion even while more injects are queued behind it.
const trackEvery = 32

// noSlot is took's inject slot for an untracked inject.
const noSlot = ^uint32(0)

// confirms tells the injects a provider has sent from those it may still
// hold. fi_inject returning 0 means the provider copied the message, not
// that it sent it: tcp;ofi_rxm, sockets and udp;ofi_rxd keep it in their
// own queues while the peer's socket (or window) is full, and fi_close
// discards what they hold. A provider sends to one peer in order
// (FI_ORDER_SAS), so the completion of a send posted after an inject to
// the same peer says that inject left the provider's queue: a buffered
// send's, or a tracked inject's (posted with fi_send, see postInject: the
// last queued inject, and every trackEvery-th to a peer). A tracked
// inject is accounted as a buffered send (Completed, Failed or Canceled
// by its completion); an untracked one counts in Completed when taken and
// here, per peer slot, as taken until a later completion confirms it. At
// Close (after waiting up to Config.InjectLinger) and RemovePeer the
// unconfirmed ones are logged and counted in Stats.InjectsUnconfirmed.
// Everything but the atomics runs on the poller goroutine; nothing here
// allocates after init.
type confirms struct {
	taken, done []uint64 // by peer slot: untracked injects taken, and confirmed
	run         []uint32 // by peer slot: untracked injects since the last tracked one
	mark        []uint64 // by buffer ID: its peer's taken when it was posted
	injMark     []uint64 // by inject slot: its peer's taken when it was posted, tracked
	open        atomic.Int64
	unconfirmed atomic.Uint64
}

func (c *confirms) init(peers, buffers, injects int) {
	c.taken, c.done, c.run = make([]uint64, peers+2), make([]uint64, peers+2), make([]uint32, peers+2)
	c.mark, c.injMark = make([]uint64, buffers), make([]uint64, injects)
}

// tracks says whether the next inject to the peer in slot asks for a
// completion: it is the only one queued (held ones aside), or the peer's
// trackEvery-th untracked one in a row.
func (q *injects) tracks(slot uint32) bool {
	return q.queued.Load()-q.held <= 1 || (int(slot) < len(q.ok.run) && q.ok.run[slot] >= trackEvery)
}

// took counts an inject the provider took for the peer in slot: untracked
// (idx noSlot), or tracked in inject slot idx.
func (c *confirms) took(slot, idx uint32) {
	if int(slot) >= len(c.taken) {
		return
	}
	if idx != noSlot {
		c.injMark[idx], c.run[slot] = c.taken[slot]+1, 0 // +1: 0 says untracked
		return
	}
	c.taken[slot]++
	c.run[slot]++
	c.open.Add(1)
}

// untrack ends inject slot idx's tracking and says whether it was tracked.
func (c *confirms) untrack(idx uint32) bool {
	if int(idx) >= len(c.injMark) || c.injMark[idx] == 0 {
		return false
	}
	c.injMark[idx] = 0
	return true
}

// posted remembers, for buffer id posted to the peer in slot, how many
// injects were taken for that peer before it.
func (c *confirms) posted(id, slot uint32) {
	if int(id) < len(c.mark) && int(slot) < len(c.taken) {
		c.mark[id] = c.taken[slot]
	}
}

// confirm confirms the first upTo untracked injects taken for slot.
func (c *confirms) confirm(slot uint32, upTo uint64) {
	if int(slot) < len(c.done) && upTo > c.done[slot] {
		c.open.Add(-int64(upTo - c.done[slot]))
		c.done[slot] = upTo
	}
}

// forget counts the injects of the peer in slot that nothing confirmed as
// unconfirmed and starts the slot afresh; it returns how many.
func (c *confirms) forget(slot uint32) uint64 {
	if int(slot) >= len(c.taken) {
		return 0
	}
	n := c.taken[slot] - c.done[slot]
	c.taken[slot], c.done[slot], c.run[slot] = 0, 0, 0
	c.open.Add(-int64(n))
	c.unconfirmed.Add(n)
	return n
}

// confirmed handles a send's completion before the send core frees it
// (poller goroutine): an OK one confirms the injects to its peer before
// it, if that peer is still the one it was posted to.
func (e *Endpoint) confirmed(key uint32, ok bool) {
	var to Peer
	var upTo uint64
	switch {
	case key&zcMark != 0:
		return
	case key&injectKey != 0:
		idx := key &^ injectKey
		if int(idx) >= len(e.inj.ok.injMark) || e.inj.ok.injMark[idx] == 0 {
			return
		}
		to, upTo = e.inj.to[idx], e.inj.ok.injMark[idx]-1
	default:
		if int(key) >= len(e.inj.ok.mark) {
			return
		}
		to, upTo = e.dests[key], e.inj.ok.mark[key]
	}
	if _, live := e.peers.lookup(to); ok && live {
		e.inj.ok.confirm(to.slot, upTo)
	}
}

// lingerInjects waits, up to Config.InjectLinger, until nothing is queued
// for the poller and every inject taken is confirmed (not on the poller
// goroutine, which must post and read completions meanwhile).
func (e *Endpoint) lingerInjects() {
	q := &e.inj
	if q.set == nil || e.cfg.InjectLinger < 0 || e.c.Poller.OnPollerGoroutine() {
		return
	}
	for deadline := time.Now().Add(e.cfg.InjectLinger); time.Now().Before(deadline) && !e.c.Ended(); {
		if q.queued.Load() == 0 && q.ok.open.Load() == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// forgetPeer forgets p's unconfirmed injects, logging them (poller
// goroutine, p just removed).
func (e *Endpoint) forgetPeer(p Peer) {
	if n := e.inj.ok.forget(p.slot); n > 0 {
		e.c.Log.Warn().Uint64("injects", n).Str("peer", e.peers.nameOfSlot(p.slot)).
			Msg("rdm peer removed while the provider may still hold injects to it: counted in InjectsUnconfirmed")
	}
}

// forgetOnClose forgets every peer's unconfirmed injects before fi_close
// may discard them, logging them.
func (e *Endpoint) forgetOnClose() {
	var n uint64
	for slot := range e.inj.ok.taken {
		n += e.inj.ok.forget(uint32(slot))
	}
	if n > 0 {
		e.c.Log.Warn().Uint64("injects", n).
			Msg("rdm endpoint closed while the provider may still hold injects: counted in InjectsUnconfirmed")
	}
}
