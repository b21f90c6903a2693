package rdm

import (
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// A peer one of whose sends completed with an error (a receiver that died:
// ofi_rxm reports ENOTCONN or ECONNRESET for the sends it had pending) is
// unreachable until RemovePeer and AddPeer: every send to it queued after
// that fails at once with the first error, instead of being posted. ofi_rxm
// refuses such posts with EAGAIN for as long as it tries to reconnect, and
// the sends of an endpoint leave in order through one hand-off queue, so a
// send to a dead peer at its head would stall the sends to every other
// peer. The set is read and written on the poller goroutine only, where
// completions, queued posts, AddPeer and RemovePeer run.
type unreachable map[fabric.Addr]fabric.Errno

// sendFailed marks the peer of send key unreachable after an error
// completion. It runs on the poller goroutine, before the completion
// releases the buffer (and with it dests[key]).
func (e *Endpoint) sendFailed(key uint32, r poll.Result) {
	if r.Errno == 0 || int(key) >= len(e.dests) {
		return
	}
	if _, known := e.dead[e.dests[key]]; !known {
		e.dead[e.dests[key]] = r.Errno
		e.c.Log.Warn().Err(r.Errno).Uint64("addr", uint64(e.dests[key])).Msg("rdm: peer unreachable; sends to it fail until RemovePeer and AddPeer")
	}
}

// reachable reports the error a send to dest fails with, 0 if none.
func (e *Endpoint) reachable(dest fabric.Addr) fabric.Errno { return e.dead[dest] }
