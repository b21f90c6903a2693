package rdm

import "sync/atomic"

// confirms tells the injects a provider has sent from those it may still
// hold. fi_inject returning 0 means the provider copied the message, not
// that it sent it: tcp;ofi_rxm, sockets and udp;ofi_rxd keep it in their
// own queues while the peer's socket (or window) is full, and fi_close
// discards what they hold. An inject reports no completion, but a
// provider sends to one peer in order (FI_ORDER_SAS), so the completion
// of a buffered send posted after an inject to the same peer says that
// inject left the provider's queue. confirms counts, per peer slot, the
// injects taken and the injects such a completion confirmed; at Close and
// RemovePeer the difference is what may have been discarded, logged and
// counted in Stats.InjectsUnconfirmed. Everything but unconfirmed runs on
// the poller goroutine only; nothing here allocates after init.
type confirms struct {
	taken, done []uint64 // by peer slot
	mark        []uint64 // by buffer ID: its peer's taken when it was posted
	unconfirmed atomic.Uint64
}

func (c *confirms) init(peers, buffers int) {
	c.taken, c.done, c.mark = make([]uint64, peers+2), make([]uint64, peers+2), make([]uint64, buffers)
}

// took counts an inject the provider took for the peer in slot.
func (c *confirms) took(slot uint32) {
	if int(slot) < len(c.taken) {
		c.taken[slot]++
	}
}

// posted remembers, for buffer id posted to the peer in slot, how many
// injects were taken for that peer before it.
func (c *confirms) posted(id, slot uint32) {
	if int(id) < len(c.mark) && int(slot) < len(c.taken) {
		c.mark[id] = c.taken[slot]
	}
}

// completed confirms the injects taken for the peer in slot before
// buffer id, which completed OK.
func (c *confirms) completed(id, slot uint32) {
	if int(id) < len(c.mark) && int(slot) < len(c.done) {
		c.done[slot] = max(c.done[slot], c.mark[id])
	}
}

// forget counts the injects of the peer in slot that nothing confirmed as
// unconfirmed and starts the slot afresh; it returns how many.
func (c *confirms) forget(slot uint32) uint64 {
	if int(slot) >= len(c.taken) {
		return 0
	}
	n := c.taken[slot] - c.done[slot]
	c.taken[slot], c.done[slot] = 0, 0
	c.unconfirmed.Add(n)
	return n
}

// forgetAll forgets every slot and returns how many injects nothing
// confirmed.
func (c *confirms) forgetAll() uint64 {
	var n uint64
	for slot := range c.taken {
		n += c.forget(uint32(slot))
	}
	return n
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
	if n := e.inj.ok.forgetAll(); n > 0 {
		e.c.Log.Warn().Uint64("injects", n).
			Msg("rdm endpoint closed while the provider may still hold injects: counted in InjectsUnconfirmed")
	}
}
