package fabric

/*
#include "shim.h"
*/
import "C"

// RecvQueueSize is how many receives QueueRecv holds for the next read.
const RecvQueueSize = C.NETIO_RECV_QUEUE

// QueueRecv queues a receive of length bytes at addr (registered memory
// with descriptor desc) on ep, for the next Read or ReadSpin of q to post
// (fi_recv, in queue order) before it reads: a poller that reposts a
// buffer after delivering its message pays one call into C per round
// instead of one more per buffer. ctx comes back in the receive's
// completion, as with Endpoint.Recv. The receive is not posted until that
// read, so queue only from the goroutine that reads q, before its next
// read; a post the read refuses is reported by RecvFailure.
//
// It returns EAGAIN when the queued receives and the refused posts not yet
// taken with RecvFailure come to RecvQueueSize (post with Endpoint.Recv
// instead), EBADF when q or ep is closed, EINVAL for a negative length or
// an endpoint whose receives are not bound to q (Endpoint.BindCQ with
// BindRecv): so q cannot close while an endpoint with receives queued on
// it is open. Closing ep drops its queued receives (Endpoint.Close), which
// may run beside the Close of q but not beside QueueRecv or the reads of
// q: those belong to the goroutine that reads q.
func (q *CQ) QueueRecv(ep *Endpoint, addr uintptr, length int, desc uintptr, ctx uint64) Errno {
	if !q.open() {
		return EBADF
	}
	if errno := ep.check(length); errno != 0 {
		return errno
	}
	if ep.rcq != q {
		return EINVAL
	}
	rq := q.rq
	if rq.n+rq.nfailed >= RecvQueueSize { // so that the read has room to list every refusal
		return EAGAIN
	}
	rq.q[rq.n] = C.struct_netio_queued_recv{ep: ep.h().v, buf: C.uintptr_t(addr), len: C.uint64_t(length),
		desc: C.uintptr_t(desc), ctx: C.uint64_t(ctx)}
	rq.n++
	return 0
}

// QueuedRecvs returns how many receives QueueRecv queued that no read has
// posted yet (0 for a closed queue).
func (q *CQ) QueuedRecvs() int {
	if !q.open() {
		return 0
	}
	return int(q.rq.n)
}

// RecvFailure returns one receive queued with QueueRecv that a read could
// not post: its ctx and the error fi_recv returned. ok is false when there
// is none left. Call it after each Read or ReadSpin until ok is false (the
// queue keeps up to RecvQueueSize failures).
func (q *CQ) RecvFailure() (ctx uint64, errno Errno, ok bool) {
	if !q.open() || q.rq.nfailed == 0 {
		return 0, 0, false
	}
	q.rq.nfailed--
	f := q.rq.failed[q.rq.nfailed]
	return uint64(f.ctx), Errno(f.err), true
}

// dropQueued removes ep's queued receives, which no read has posted, from
// q (nil or closed: nothing to do). ep is closing: its handle is compared,
// never followed. The caller holds closeMu (Endpoint.Close).
func (q *CQ) dropQueued(ep *Endpoint) {
	if !q.open() {
		return
	}
	rq, h := q.rq, ep.h().v
	kept := C.uint32_t(0)
	for i := C.uint32_t(0); i < rq.n; i++ {
		if rq.q[i].ep != h {
			rq.q[kept] = rq.q[i]
			kept++
		}
	}
	rq.n = kept
}
