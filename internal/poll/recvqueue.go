package poll

import (
	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// Repost posts a receive of length bytes at addr (with descriptor desc) on
// ep again, for a handler that got the buffer back in HandleCompletion.
// For the last completion of a batch the receive is queued on the poller's
// completion queue (fabric.CQ.QueueRecv), and the poller's next read posts
// it in the same call into C: that read comes after the round's event
// queue read and queued work, never after a block (block returns at once
// while receives wait). So a lone message (a request-reply exchange)
// costs one call into C for the read, one for a reply sent from the
// callback, and none for the repost (docs/performance.md, "rdm 64 B
// latency: the repost rides on the next read"). The other completions of a
// batch are posted at once, as is one the queue has no room for: a burst
// then never finds the provider short of receive buffers while the batch
// is delivered, one buffer per poller held back at most. A post the read
// refuses comes back to the owner as a receive that failed with
// Result.Unposted set (not an error completion, so not in Stats.Errors:
// the owner counts it).
//
// Call it on the poller goroutine only, with ep's receives bound to the
// poller's queue. Closing ep drops its receives still queued
// (fabric.Endpoint.Close): on the poller goroutine (Do) while the poller
// runs, and once it has stopped on the caller's goroutine, possibly while
// the poller closes its queue, which fabric allows (the two closes take
// turns, and CQ.Close fails while ep is open).
func (p *Poller) Repost(ep *fabric.Endpoint, addr uintptr, length int, desc uintptr, ctx uint64) fabric.Errno {
	if p.lastOfBatch {
		if errno := p.cq.QueueRecv(ep, addr, length, desc, ctx); errno != fabric.EAGAIN {
			return errno
		}
	}
	return ep.Recv(addr, length, desc, ctx)
}

// unposted hands each receive queued by Repost that the last read could
// not post to its owner, as a failed receive with Unposted set.
func (p *Poller) unposted() {
	for {
		ctx, errno, ok := p.cq.RecvFailure()
		if !ok {
			return
		}
		p.handTo(ctx, Result{Status: netio.Failed, Errno: errno, Flags: fabric.FlagRecv, Unposted: true}, nil)
	}
}
