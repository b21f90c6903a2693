package fabric

/*
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include "shim.h"

// netio_peek asks whether a message waits on the endpoint without taking
// it: fi_recvmsg with FI_PEEK and no buffer (fi_msg(3)).
static ssize_t netio_peek(netio_ep_h eph, uint64_t ctx)
{
	struct fid_ep *ep = NETIO_H(struct fid_ep *, eph);
	struct fi_msg msg = {
		.msg_iov = NULL,
		.desc = NULL,
		.iov_count = 0,
		.addr = FI_ADDR_UNSPEC,
		.context = (void *)(uintptr_t)ctx,
		.data = 0,
	};
	return fi_recvmsg(ep, &msg, FI_PEEK);
}
*/
import "C"

// ENOMSG is the error a peek completes with when no message waits
// (Endpoint.Peek).
const ENOMSG = Errno(C.FI_ENOMSG)

// Peek asks the provider whether a received message waits that no posted
// buffer has taken yet (fi_recvmsg with FI_PEEK, fi_msg(3)); the message
// stays where it is. The answer is a completion with ctx as its Context:
// a successful one (Len the message's length) when a message waits, an
// error completion with ENOMSG when none does. Its flags are a receive's
// (sockets drops FI_PEEK from them), so the caller must tell it apart by
// ctx alone.
// Only providers that implement FI_PEEK on message endpoints may be asked
// (quirks.Quirks.PeekBuffered): others take the call for an ordinary
// receive without a buffer. It returns EBADF on a closed endpoint.
func (e *Endpoint) Peek(ctx uint64) Errno {
	if errno := e.check(0); errno != 0 {
		return errno
	}
	return errnoOfSize(C.netio_peek(e.h(), C.uint64_t(ctx)))
}
