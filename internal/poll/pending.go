package poll

import "time"

// pendingHoldLimit bounds, in multiples of Config.SpinBudget, how long a
// poller whose completion queue has no wait descriptor keeps spinning past
// its budget while a handler has operations pending (Pender).
//
// Such a poller blocks on its wake-up descriptor alone, noWaitBlockMS at a
// time, and the provider makes no progress while it sleeps (manual
// progress). A send in flight on tcp;ofi_rxm above the eager size is a
// rendezvous: the receiver reads the data from the sender, and the sender's
// provider serves that read only from the sender's own CQ reads. A sender
// that blocks for a millisecond because no completion came for a spin
// budget stalls the receiver's read for that millisecond, the receiver's
// completions stop, and its poller blocks in turn (measurements in
// docs/performance.md). So while sends are pending the poller keeps
// spinning, yielding between slices as in its budget. The limit outlasts
// a peer's blind sleep: a receiving poller of the same kind spins for up to
// blindStretchLimit budgets, then sleeps 1 ms (noWaitBlockMS) before it
// reads again. Past it without a completion (a peer descheduled on a
// loaded machine, or one that stopped answering) the poller blocks as
// before: a send that never completes must not cost a core, and on a
// loaded machine the spin would take the CPU the peer needs.
const pendingHoldLimit = 2 * blindStretchLimit

// Pender is a Handler whose posted operations may wait for this poller's
// progress to complete (sends on a provider with manual progress). Pending
// reports whether any are in flight; it runs on the poller goroutine and
// must be cheap (a few atomic loads), as it is asked between spin slices.
type Pender interface {
	Pending() bool
}

// holdForPending reports whether a poller without a completion queue
// descriptor, idle for idle past its budget, should keep spinning because
// a handler has operations pending; see pendingHoldLimit.
func (p *Poller) holdForPending(idle time.Duration) bool {
	if p.canWait || p.cfg.SpinBudget <= 0 || idle >= pendingHoldLimit*p.cfg.SpinBudget {
		return false
	}
	for _, h := range *p.owners.Load() {
		if pd, ok := h.(Pender); ok && pd.Pending() {
			return true
		}
	}
	return false
}
