package pubsub

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
)

// TestRoomTickSameRefusal: the housekeeping tick lets a refusal go only
// after two ticks of that refusal with room that did not grow; a room
// seen at a tick of an earlier refusal (ended by a completion or by the
// tick) does not count.
func TestRoomTickSameRefusal(t *testing.T) {
	var w roomWait
	var r refusal
	r.mark()
	w.tick(&r, 3, true)
	assert.True(t, r.set.Load(), "let go at the refusal's first tick")
	w.tick(&r, 3, true)
	assert.False(t, r.set.Load(), "room that did not grow over a tick: let go")
	assert.Equal(t, uint64(1), w.tickWakes.Load())

	r.mark() // a new refusal: the tick's 3 was the last one's
	w.tick(&r, 2, true)
	assert.True(t, r.set.Load(), "let go by a tick of the previous refusal")

	w.tick(&r, 5, true) // ended by a completion, then refused again
	w.clear(&r, &w.wakes)
	r.mark()
	w.tick(&r, 1, true)
	assert.True(t, r.set.Load(), "let go by a tick from before the mark was cleared")
	w.tick(&r, 1, false)
	w.tick(&r, 1, false)
	assert.True(t, r.set.Load(), "let go without room")
	w.tick(&r, 1, true)
	assert.False(t, r.set.Load())
	assert.Equal(t, uint64(2), w.tickWakes.Load())
}

// TestWaitRoomTickLetsGo: the housekeeping tick is what ends a wait for a
// pool that has some room but never gets a batch back (ZeroCopy,
// MaxInFlight 4, one entry free: a batch is 2): WaitRoom returns with
// one let-go by the tick and no wake; with no entry free it waits until
// its ctx ends.
func TestWaitRoomTickLetsGo(t *testing.T) {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	p, err := NewPublisher(mgr, "127.0.0.1:0", PublisherConfig{Tags: []uint64{1}, Mode: ZeroCopy, MaxInFlight: 4})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	ts := (*p.tags.Load())[1]
	taken := []uint32{<-p.zcFree, <-p.zcFree, <-p.zcFree}
	p.refusePool(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.WaitRoom(ctx, 1), "one entry free, no completion: not let go by the tick")
	st := p.Stats()
	assert.Equal(t, uint64(1), st.RoomTickWakes, "%+v", st)
	assert.Zero(t, st.RoomWakes, "%+v", st)

	taken = append(taken, <-p.zcFree)
	p.refusePool(ts)
	short, cancelShort := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancelShort()
	assert.ErrorIs(t, p.WaitRoom(short, 1), context.DeadlineExceeded, "let go with no entry free")
	assert.Equal(t, uint64(1), p.Stats().RoomTickWakes)

	for _, idx := range taken {
		p.zcPut(idx)
	}
	assert.NoError(t, p.WaitRoom(ctx, 1), "every entry back")
}
