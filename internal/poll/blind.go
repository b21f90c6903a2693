package poll

import "time"

// blindStretchLimit bounds the spin budget of a poller whose completion
// queue has no wait descriptor (shm, udp;ofi_rxd, and ofi_rxm under
// quirks.Quirks.StaleWaitEntries), in multiples of Config.SpinBudget.
//
// Such a poller blocks on its wake-up descriptor alone, noWaitBlockMS at a
// time, so traffic cannot end its block: a stream whose completions pause
// for longer than the spin budget (the peer or this process descheduled
// for a moment) loses a millisecond each time, and stretchedBudget, which
// needs a wake-up by the queue's descriptor, never lengthens the budget.
// So when the round after a block that timed out finds completions, the
// traffic went on during the block, and the budget doubles, up to this
// limit; a round after such a block that finds nothing (idle) brings it
// back to SpinBudget. The price: a poller whose traffic pauses often spins
// up to this limit before it blocks (measurements in docs/performance.md).
const blindStretchLimit = 8

// blindBudget returns the spin budget of a poller without a completion
// queue descriptor after a block that timed out: doubled from budget, at
// least base and at most blindStretchLimit × base, when the round after the
// block found completions (found), else base. A base that blocks at once
// stays.
func blindBudget(base, budget time.Duration, found bool) time.Duration {
	if base <= 0 || !found {
		return base
	}
	return min(2*max(budget, base), blindStretchLimit*base)
}
