package poll

// maxReadOut bounds the reads of one ReadOut (each a batch of up to
// fabric.MaxBatch completions or one error completion), so that a provider
// that writes no completion for some posted operation at close, under
// traffic that never lets the queue run empty, cannot hold the poller
// goroutine for ever.
const maxReadOut = 1 << 14

// ReadOut reads the completion queue and dispatches what it holds, as the
// poll loop does, until done reports true or a read finds the queue
// empty. It reports whether it got there; false when it could not read:
// called off the poller goroutine (after the poller stopped), from a
// callback while the completions of a read are being dispatched (reading
// again would overwrite them), or when the read failed or maxReadOut
// reads went by without either.
//
// Why: the poll loop reads at most 16 batches (an error completion counts
// as one) before it runs queued work, and a read that returns less than a
// batch may have stopped before an error completion, so a function run by
// Do can find completions still waiting in the queue. An endpoint that is
// closing calls ReadOut after fi_close, with done reporting that every
// operation it posted has completed (tcp flushes each with FI_ECANCELED):
// the queue is read in order, so everything the provider wrote for it
// before the close, such as messages it placed (and, with
// FI_DELIVERY_COMPLETE, acknowledged to their sender), reaches its handler
// instead of being dropped once it unregisters. Other owners' completions
// read meanwhile are dispatched to them as usual. A read found empty after
// the close also means that nothing of the endpoint is left, for a provider
// that does not flush.
func (p *Poller) ReadOut(done func() bool) bool {
	if !p.OnPollerGoroutine() || p.delivering { // delivering is the poller goroutine's
		return false
	}
	for range maxReadOut {
		if done() {
			return true
		}
		switch _, res := p.readOnce(false, 0); res {
		case readEmpty:
			p.cqEmptied++
			return true
		case readFailed:
			return false
		}
	}
	return done()
}

// Dispatching reports whether the caller is a completion callback: it runs
// on the poller goroutine while the completions of a read are being
// dispatched, where ReadOut refuses. Work that must read the queue (a
// closing endpoint's read-out) is then queued with Go, to run after the
// callback's read has been dispatched.
func (p *Poller) Dispatching() bool { return p.OnPollerGoroutine() && p.delivering }
