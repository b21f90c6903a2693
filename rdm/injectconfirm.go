package rdm

import (
	"sync/atomic"
	"time"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
)

// DefaultInjectLinger is how long Close waits for taken injects to be
// confirmed when Config.InjectLinger is 0.
const DefaultInjectLinger = time.Second

// trackEvery bounds the untracked injects to one peer in a row: the next
// asks for a completion even while more injects to that peer are queued
// behind it.
const trackEvery = 32

// confirms tells the injects a provider has sent from those it may still
// hold. fi_inject returning 0 means the provider copied the message, not
// that it sent it: tcp;ofi_rxm, sockets and udp;ofi_rxd keep it in their
// own queues while the peer's socket (or window) is full, and fi_close
// discards what they hold. A provider sends to one peer in order
// (FI_ORDER_SAS; see docs/providers.md for why it holds per provider), so
// the completion of a send posted after an inject to the same peer says
// that inject left the provider's queue: a buffered send's, a zero-copy
// send's, or a tracked inject's. A tracked inject (see injects.tracks: the
// last one queued to its peer, and every trackEvery+1-th in a row) is
// copied into a confirm slot of its own, in registered memory (slots.Cut,
// so it passes a real descriptor to FI_MR_LOCAL providers), and posted
// with fi_send: at most one per peer in flight. While the peer's is still
// in flight, its later injects go untracked, but the last one queued waits
// for that completion (waitsForConfirm); when every confirm slot is in
// flight, or the provider refuses the tracked fi_send for now, the inject
// goes untracked (fi_inject). So a stalled or dead peer holds one confirm
// slot, and inject queue slots only for its waiting last inject and for
// those the provider refuses (parked as any refused send). A tracked
// inject is accounted as a buffered send (Completed, Failed or Canceled by
// its completion); an untracked one counts in Completed when taken and
// here, per peer slot, as taken until a later completion confirms it. At Close (after waiting up
// to Config.InjectLinger) and RemovePeer the unconfirmed ones are logged
// and counted in Stats.InjectsUnconfirmed. A confirm slot is held until
// its send completes or the endpoint closes, also after RemovePeer (the
// provider may still read it): a provider that never completes a send to
// a removed dead peer (udp;ofi_rxd) keeps it (Stats.InjectConfirmsHeld).
// Everything but the atomics runs on the poller goroutine; nothing here
// allocates after init.
//
// An endpoint that never had an untracked inject taken (any false) has
// nothing to confirm: every taken count is 0, so every mark would be 0
// and no completion could confirm anything or leave covered other than 0.
// Its sends and their completions skip the bookkeeping (posted, confirmed)
// for one byte read; once any is set it stays set. It is read and written
// on the poller goroutine only (took, posted, confirmed: postTo and
// HandleCompletion), so it needs no atomic.
type confirms struct {
	any bool // an untracked inject was taken: the marks and confirms are kept from then on

	taken, done []uint64 // by peer slot: untracked injects taken, and confirmed
	run         []uint32 // by peer slot: untracked injects since the last tracked one
	mark        []uint64 // by send index (buffers, then header slots): its peer's taken when it was posted

	// The confirm slots: state, memory, and by confirm slot the peer, its
	// taken when posted, and how many injects before it RemovePeer left
	// out of unconfirmed because this send was to confirm them.
	set      *slots.Set
	mem      *slots.Memory
	to       []Peer
	upTo     []uint64
	covered  []uint64
	inFlight []int32 // by peer slot: the confirm slot + 1 of its peer's tracked inject, 0 for none
	// sendTo posts a tracked inject: fabric.Endpoint.SendTo, which a test
	// replaces to refuse it.
	sendTo func(ep *fabric.Endpoint, addr uintptr, n int, desc uintptr, dest fabric.Addr, ctx uint64) fabric.Errno

	open atomic.Int64 // untracked injects taken and not confirmed
	held atomic.Int64 // confirm slots in flight (tracked injects posted, not yet claimed)
	// core holds the one count of unconfirmed injects
	// (sendcore.Core.CountUnconfirmed, Stats.InjectsUnconfirmed); nil in
	// tests of the tables alone, which count nothing.
	core *sendcore.Core
}

// unconfirmed counts n injects nothing confirmed in the core's count.
func (c *confirms) unconfirmed(n uint64) {
	if c.core != nil && n > 0 {
		c.core.CountUnconfirmed(n)
	}
}

// init sizes the tables (sends: the buffers and header slots whose
// completions confirm) and cuts the confirm slots from registered memory:
// one per peer, at most one per inject queue slot, none when the provider
// takes no inject payload.
func (c *confirms) init(mgr *domain.Manager, peers, sends, queue, size int) error {
	c.taken, c.done, c.run = make([]uint64, peers+2), make([]uint64, peers+2), make([]uint32, peers+2)
	c.mark, c.inFlight = make([]uint64, sends), make([]int32, peers+2)
	c.sendTo = (*fabric.Endpoint).SendTo
	n := min(peers+2, queue)
	if size <= 0 || n <= 0 {
		return nil
	}
	var err error
	if c.mem, err = slots.Cut(mgr, size, n, domain.AccessSend); err != nil {
		return err
	}
	c.set, c.to, c.upTo, c.covered = slots.NewSet(n), make([]Peer, n), make([]uint64, n), make([]uint64, n)
	return nil
}

// tracks says whether the next inject to the peer in slot asks for a
// completion (tracksAt with none ahead).
func (q *injects) tracks(slot uint32) bool {
	track, _ := q.tracksAt(slot, 0)
	return track
}

// tracksAt is the tracking rule, for the inject to the peer in slot with
// ahead injects to it before it not yet counted (a run's, PostRun): track
// says it asks for a completion, as it is the last one queued to that peer
// or the peer's trackEvery+1-th untracked one in a row, never while the
// peer's previous tracked inject is in flight; mayWait says it is the last
// one queued while that tracked inject is in flight, so that it may wait
// for it (waitsForConfirm decides with its lane).
func (q *injects) tracksAt(slot uint32, ahead int) (track, mayWait bool) {
	c := &q.ok
	if c.set == nil || int(slot) >= len(c.inFlight) {
		return false, false
	}
	last := q.perPeer[slot].Load()-int32(ahead) <= 1
	if c.inFlight[slot] != 0 {
		return false, last
	}
	return last || c.run[slot]+uint32(ahead) >= trackEvery, false
}

// waitsForConfirm says whether the inject to the peer in slot, the last
// one queued to it, waits for the peer's tracked inject in flight to
// complete, so as to go tracked itself: otherwise nothing might confirm
// it. It waits parked in the peer's lane, holding its queue slot, for half
// Config.PeerTimeout at most; not once any send to the peer is queued
// behind it in the lane (an inject, whose perPeer count ends the wait too,
// or a buffered or zero-copy send, whose completion will confirm it); and
// not for a peer whose lane timed out: a waiting inject never times out
// for a send the provider would have taken. It is asked by postSend with
// the lane empty, and by retryLane with this inject at the lane's head.
func (e *Endpoint) waitsForConfirm(slot uint32) bool {
	if _, mayWait := e.inj.tracksAt(slot, 0); !mayWait {
		return false
	}
	if int(slot) >= len(e.park.lanes) {
		return false
	}
	l := &e.park.lanes[slot]
	if l.unreachable {
		return false
	}
	return l.head < 0 || (e.park.next[l.head] < 0 && time.Since(l.since) < e.cfg.PeerTimeout/2)
}

// took counts an untracked inject the provider took for the peer in slot.
func (c *confirms) took(slot uint32) {
	if int(slot) >= len(c.taken) {
		return
	}
	c.any = true
	c.taken[slot]++
	c.run[slot]++
	c.open.Add(1)
}

// posted remembers, for the send with index id (a buffer's ID, or a
// header slot's sendIndex) posted to the peer in slot, how many injects
// were taken for that peer before it. postTo calls it only once an
// untracked inject was taken (any: until then the mark would be 0, as it
// still is, and completions skip confirmed), and after the post
// succeeded, on the poller goroutine, which is also the one that reads
// the send's completion and the only one that counts injects taken: the
// completion cannot be read, nor taken change, between the post and this.
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
// unconfirmed and starts the slot afresh for its next peer; it returns how
// many. Those that p's tracked inject in flight would confirm are left to
// its completion (counted only if it fails or is canceled), when covering
// is that peer, p: one posted to the slot's previous peer covers none of
// p's, whose counts restarted at its AddPeer. The slot's next peer does
// not wait for the old confirm: claimConfirm leaves inFlight alone once it
// names another.
func (c *confirms) forget(slot uint32, covering Peer) uint64 {
	if int(slot) >= len(c.taken) {
		return 0
	}
	open := c.taken[slot] - c.done[slot]
	n := open
	if f := c.inFlight[slot]; covering.Valid() && f != 0 && c.to[f-1] == covering && c.upTo[f-1] > c.done[slot] {
		c.covered[f-1] = c.upTo[f-1] - c.done[slot]
		n -= c.covered[f-1]
	}
	c.open.Add(-int64(open))
	c.taken[slot], c.done[slot], c.run[slot], c.inFlight[slot] = 0, 0, 0, 0
	c.unconfirmed(n)
	return n
}

// confirmed handles a send's completion before the send core frees it
// (poller goroutine): an OK one confirms the injects to its peer before
// it, if that peer is still the one it was posted to. Inlined into the
// completion path, it costs an endpoint that never had an untracked
// inject taken one byte read (see confirms.any).
func (e *Endpoint) confirmed(key uint32, ok bool) {
	if e.inj.ok.any {
		e.confirmSend(key, ok)
	}
}

// confirmSend is confirmed's work once an untracked inject was taken.
func (e *Endpoint) confirmSend(key uint32, ok bool) {
	var to Peer
	var upTo uint64
	c := &e.inj.ok
	switch {
	case key&injectKey != 0:
		return
	case key&zcMark != 0:
		i := e.sendIndex(key)
		if int(i) >= len(c.mark) {
			return
		}
		to, upTo = peerOf(e.zc.Dest(key&^zcMark)), c.mark[i]
	case key&confirmKey != 0:
		i := key &^ confirmKey
		if c.set == nil || int(i) >= len(c.to) {
			return
		}
		if ok {
			c.covered[i] = 0 // sent: RemovePeer left them out rightly
		}
		to, upTo = c.to[i], c.upTo[i]
	default:
		if int(key) >= len(c.mark) {
			return
		}
		to, upTo = e.dests[key], c.mark[key]
	}
	if _, live := e.peers.lookup(to); ok && live {
		c.confirm(to.slot, upTo)
	}
}

// lingerInjects waits, up to Config.InjectLinger, until nothing is queued
// for the poller and then either every inject taken is confirmed and no
// tracked inject is in flight, or no send is pending any more, so that
// nothing can confirm the rest (not on the poller goroutine, which must
// post and read completions meanwhile).
func (e *Endpoint) lingerInjects() {
	q := &e.inj
	if q.set == nil || e.cfg.InjectLinger < 0 || e.c.Poller.OnPollerGoroutine() {
		return
	}
	for deadline := time.Now().Add(e.cfg.InjectLinger); time.Now().Before(deadline) && !e.c.Ended(); {
		if q.queued.Load() == 0 {
			pending, _ := e.c.Counters.Progress()
			if !pending || (q.ok.open.Load() == 0 && q.ok.held.Load() == 0) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// forgetPeer forgets p's unconfirmed injects, logging them (poller
// goroutine, p just removed).
func (e *Endpoint) forgetPeer(p Peer) {
	if n := e.inj.ok.forget(p.slot, p); n > 0 {
		e.c.Log.Warn().Uint64("injects", n).Str("peer", e.peers.nameOfSlot(p.slot)).
			Msg("rdm peer removed while the provider may still hold injects to it: counted in InjectsUnconfirmed")
	}
}

// forgetOnClose forgets every peer's unconfirmed injects before fi_close
// may discard them, logging them.
func (e *Endpoint) forgetOnClose() {
	var n uint64
	for slot := range e.inj.ok.taken {
		n += e.inj.ok.forget(uint32(slot), Peer{})
	}
	if n > 0 {
		e.c.Log.Warn().Uint64("injects", n).
			Msg("rdm endpoint closed while the provider may still hold injects: counted in InjectsUnconfirmed")
	}
}
