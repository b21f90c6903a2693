package rdm

import (
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/sendcore"
)

// injectRun is the scratch of PostRun: the queue offsets and lengths of
// a run of untracked injects to one peer.
type injectRun struct {
	off, lens [sendcore.RunMax]uint32
	idx       [sendcore.RunMax]uint32
	// singly makes PostRun post nothing, so that every send goes through
	// parking.post one by one: set by a test that wraps that post alone
	// (export_test's WrapLanePost).
	singly bool
	// post is fabric.Endpoint.InjectRunTo; a test puts a fault between a
	// run and the provider with it.
	post func(ep *fabric.Endpoint, mem []byte, off, lens []uint32, dest fabric.Addr) (int, fabric.Errno)
}

// PostRun posts the leading queued sends of keys that are untracked
// injects to one peer with nothing parked before them in one cgo call
// (fabric.Endpoint.InjectRunTo), and returns how many it posted, each
// accounted as postInject accounts an untracked one it posted. It stops
// before a send that is not an inject (a buffered, zero-copy or confirm
// key has no injectKey mark), goes to another peer, or that postInject
// would track or park (injects.tracksAt), as those decide
// with the counts of the injects before it; and at the first inject the
// provider refuses, whose errno it returns. drainHandOff then posts the
// refused inject alone (sendcore.RunPoster): a run refused at its first
// inject posts nothing (0), which leaves that inject to the kind's post
// too (refused again, it is parked as any refused send, and the peer's
// later sends queue behind it in its lane), so a refused inject is offered
// twice at most. It runs on the poller goroutine.
func (k *kind) PostRun(ep *fabric.Endpoint, keys []uint32, ns []int) (int, fabric.Errno) {
	e := (*Endpoint)(k)
	r := &e.run
	if r.singly || keys[0]&injectKey == 0 {
		return 0, 0
	}
	to := e.inj.to[keys[0]&^injectKey]
	dest, ok := e.peers.lookup(to)
	if !ok || e.park.busy(to.slot) || int(to.slot) >= len(e.inj.perPeer) {
		return 0, 0
	}
	m := 0
	for i, key := range keys[:min(len(keys), len(r.off))] {
		if key&injectKey == 0 || e.inj.to[key&^injectKey] != to || e.inj.runStops(to.slot, i) {
			break
		}
		idx := key &^ injectKey
		r.idx[i], r.off[i], r.lens[i] = idx, idx*uint32(e.inj.size), uint32(ns[i])
		m++
	}
	if m < 2 {
		return 0, 0
	}
	d, errno := r.post(ep, e.inj.mem, r.off[:m], r.lens[:m], dest)
	d = min(max(d, 0), m) // a wrapped post (a test's) may return anything
	if d > 0 {
		e.park.lanes[to.slot].unreachable = false
	}
	for _, idx := range r.idx[:d] {
		e.injected(to.slot, idx)
	}
	return d, errno
}

// runStops says whether a run stops before the inject to the peer in slot
// with ahead injects of the run before it: postInject would track it or
// might park it (tracksAt).
func (q *injects) runStops(slot uint32, ahead int) bool {
	track, mayWait := q.tracksAt(slot, ahead)
	return track || mayWait
}

// Joins says whether the queued send with key next may follow the one
// with key prev in a run: both are injects to the same peer
// (sendcore.RunPoster). It runs with the hand-off queue's lock held, on
// the poller goroutine.
func (k *kind) Joins(prev, next uint32) bool {
	e := (*Endpoint)(k)
	return prev&next&injectKey != 0 && e.inj.to[prev&^injectKey] == e.inj.to[next&^injectKey]
}
