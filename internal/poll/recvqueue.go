package poll

import (
	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
)

// Repost posts a receive of length bytes at addr (with descriptor desc) on
// ep again, for a handler that got the buffer back in HandleCompletion.
// For the last completion of a batch the receive is queued on the poller's
// completion queue (fabric.CQ.QueueRecv), and the poller's next read, which
// comes right after the batch and always before it could block, posts it
// in the same call into C. So a lone message (a request-reply exchange)
// costs one call into C for the read, one for a reply sent from the
// callback, and none for the repost (docs/performance.md, "rdm 64 B
// latency: the repost rides on the next read"). The other completions of a
// batch are posted at once, as is one the queue has no room for: a burst
// then never finds the provider short of receive buffers while the batch
// is delivered, one buffer per poller held back at most. A post the read
// refuses comes back to the owner as a receive that failed with
// Result.Unposted set.
//
// Call it on the poller goroutine only, with ep bound to the poller's
// queue; closing ep drops its receives still queued (fabric.Endpoint.Close),
// which endpoints do on the poller goroutine (Do) as well.
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
		h, found := (*p.owners.Load())[uint32(ctx>>32)]
		if !found {
			p.dropped.Add(1)
			continue
		}
		p.errs.Add(1)
		h.HandleCompletion(uint32(ctx), Result{Status: netio.Failed, Errno: errno, Flags: fabric.FlagRecv, Unposted: true})
	}
}
