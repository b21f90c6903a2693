package rdm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/internal/backoff"
	"github.com/netio-go/netio/internal/slots"
)

// TestZeroInjectSizeTracksNothing: a provider with inject_size 0 (shm with
// hmem) gets an inject queue of empty slots, whose pieces are empty, and no
// confirm slots: its injects are never tracked, so nothing indexes memory
// that is not there.
func TestZeroInjectSizeTracksNothing(t *testing.T) {
	var q injects
	q.init(4, 0, 2)
	require.NoError(t, q.ok.init(nil, 2, 8, q.len(), 0)) // no memory to cut: the manager is not used
	for idx := range uint32(4) {
		assert.Empty(t, q.piece(idx, 0))
	}
	assert.Nil(t, q.ok.set)
	assert.False(t, q.tracks(0))
	assert.Empty(t, q.ok.pendingConfirms(nil))
	assert.NoError(t, q.ok.closeConfirms())
}

// TestInjectStopsWaitingForConfirmBehindASend: the last inject queued to
// a peer whose tracked inject is in flight waits for it parked at the head
// of the peer's lane, but not once a send is parked behind it (a buffered
// send, which perPeer does not count): that send's completion confirms it,
// and it must not wait half PeerTimeout for the confirm.
func TestInjectStopsWaitingForConfirmBehindASend(t *testing.T) {
	var e Endpoint
	e.cfg.PeerTimeout = time.Hour
	e.inj.init(4, 8, 2)
	require.NoError(t, e.inj.ok.init(nil, 2, 8, e.inj.len(), 0))
	e.inj.ok.set = slots.NewSet(1) // as if a confirm slot were cut
	e.park.init(2, 8, time.Hour, func() {}, nil, nil)
	for i := range e.park.lanes { // push arms the timer: an hour ahead, as no poller runs it here
		e.park.lanes[i].wait = backoff.New(time.Hour, time.Hour)
	}
	defer e.park.timer.Stop()
	const slot = 1
	e.inj.ok.inFlight[slot] = 1 // the peer's tracked inject is in flight
	e.inj.perPeer[slot].Store(1)
	assert.True(t, e.waitsForConfirm(slot), "the last inject, lane empty: waits")
	now := time.Now()
	e.park.push(slot, 4, 8, now) // it parks
	assert.True(t, e.waitsForConfirm(slot), "alone at the head of its lane: waits")
	e.park.push(slot, 0, 8, now) // a buffered send parks behind it
	assert.False(t, e.waitsForConfirm(slot), "a send behind it: goes now")
	e.inj.ok.inFlight[slot] = 0
	e.park.detach(slot, now)
	assert.False(t, e.waitsForConfirm(slot), "no tracked inject in flight: nothing to wait for")
}
