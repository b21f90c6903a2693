package rdm

import (
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/slots"
)

// sendTracked copies queued inject idx (n bytes to peer to) into a
// confirm slot and posts it from there with fi_send and a completion
// (poller goroutine). With no confirm slot free, or the fi_send refused
// for now (ofi_rxm's needs a transmit buffer of its own, which fi_inject
// may not), it sends nothing and says so (sent false, errno 0): the
// inject goes untracked. Refused for good, it returns the errno. Taken,
// the queue slot is freed at once, uncounted: the completion counts it.
func (e *Endpoint) sendTracked(ep *fabric.Endpoint, idx uint32, n int, to Peer, dest fabric.Addr) (fabric.Errno, bool) {
	c := &e.inj.ok
	i, ok := c.set.TakePosted(slots.SoleHolder, 0)
	if !ok {
		return 0, false
	}
	p := c.mem.Piece(i)
	copy(p.Bytes, e.inj.piece(idx, n))
	if errno := c.sendTo(ep, p.Addr, n, p.Desc, dest, e.c.Owner.Context(i|confirmKey)); errno != 0 {
		c.set.Complete(i, slots.SoleHolder)
		if errno.Temporary() {
			return 0, false
		}
		return errno, false
	}
	c.held.Add(1)
	c.to[i], c.upTo[i], c.covered[i] = to, c.taken[to.slot], 0
	c.inFlight[to.slot], c.run[to.slot] = int32(i)+1, 0
	e.inj.claim(idx)
	return 0, true
}

// claimConfirm frees confirm slot i once, for its completion or its
// cancel; injects RemovePeer left to it are unconfirmed unless it
// completed OK (confirmed cleared them first). Its peer slot's inFlight is
// cleared only if it still names i: RemovePeer cleared it for the slot's
// next peer, whose own tracked inject may be in flight now.
func (c *confirms) claimConfirm(i uint32) (uint64, bool) {
	if c.set == nil {
		return 0, false
	}
	if _, ok := c.set.Complete(i, slots.SoleHolder); !ok {
		return 0, false
	}
	c.held.Add(-1)
	if s := c.to[i].slot; int(s) < len(c.inFlight) && c.inFlight[s] == int32(i)+1 {
		c.inFlight[s] = 0
	}
	c.unconfirmed(c.covered[i])
	c.covered[i] = 0
	return 0, true // a tracked inject has no key: ReportTo reports it to nobody
}

// pendingConfirms appends the tracked injects in flight to dst, marked.
func (c *confirms) pendingConfirms(dst []uint32) []uint32 {
	if c.set == nil {
		return dst
	}
	return c.set.PostedMarked(dst, slots.SoleHolder, confirmKey)
}

// closeConfirms gives the confirm slots' memory back; the endpoint is
// closed, so the provider reads none of them.
func (c *confirms) closeConfirms() error {
	if c.mem == nil {
		return nil
	}
	err := c.mem.Close()
	c.mem = nil
	return err
}
