package promstats_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/pubsub"
	"github.com/netio-go/netio/rdm"
	"github.com/netio-go/netio/stats"
)

func kind(s stats.Snapshot, name string) (stats.Kind, bool) {
	for _, k := range s.Kinds {
		if k.Kind == name {
			return k, true
		}
	}
	return stats.Kind{}, false
}

// TestSnapshotCoversEveryKind opens one of every connected kind, a pool, a
// cache and pub/sub parts on one manager, and checks that each is in the
// snapshot with what it did, and that closing them empties the live
// sections and keeps the totals.
func TestSnapshotCoversEveryKind(t *testing.T) {
	mgr := openDomain(t)
	s := openStream(t, mgr) // buffered + receive
	s.send(t, 3, 10)
	ctx := context.Background()

	var zcDone atomic.Int64
	zc, err := endpoint.DialZeroCopy(ctx, mgr, s.ln.Addr(), endpoint.ZeroCopyConfig{
		OnSendCompleted: func(uint64, netio.Status) { zcDone.Add(1) }})
	require.NoError(t, err)
	data := []byte("zero-copy payload")
	require.Equal(t, netio.OK, zc.Send([]byte("h"), data, 1))
	require.Eventually(t, func() bool { return zcDone.Load() == 1 }, waitFor, time.Millisecond)

	var recDone atomic.Int64
	rs, err := endpoint.DialReconnecting(mgr, s.ln.Addr(), endpoint.ReconnectConfig{
		OnSendCompleted: func(uint64, netio.Status) { recDone.Add(1) }})
	require.NoError(t, err)
	_, st := rs.Send([]byte("one"))
	require.Equal(t, netio.OK, st)
	require.Eventually(t, func() bool { return recDone.Load() == 1 }, waitFor, time.Millisecond)

	p, err := pool.New(mgr, pool.Config{Size: 4096, Count: 4})
	require.NoError(t, err)
	cache, err := mgr.NewRegistrationCache(domain.CacheConfig{})
	require.NoError(t, err)

	// A send completes once the kernel has it, before the receiver has
	// counted it: wait for all five (3 buffered, zero-copy, reconnecting).
	require.Eventually(t, func() bool {
		k, _ := kind(mgr.Snapshot(), stats.KindReceive)
		return k.MessagesReceived == 5
	}, waitFor, time.Millisecond)
	snap := mgr.Snapshot()
	b, err := json.Marshal(snap)
	require.NoError(t, err, "JSON-marshalable")
	assert.Contains(t, string(b), `"kind":"zerocopy"`)
	assert.Equal(t, "tcp", snap.Provider)
	for name, sent := range map[string]uint64{stats.KindBuffered: 3, stats.KindZeroCopy: 1, stats.KindReconnecting: 1} {
		k, ok := kind(snap, name)
		if assert.True(t, ok, name) {
			assert.Equal(t, sent, k.MessagesSent, name)
			assert.Equal(t, sent, k.SendsCompleted, name)
			assert.Equal(t, 1, k.Live, name)
		}
	}
	recv, _ := kind(snap, stats.KindReceive)
	assert.Equal(t, 3, recv.Live, "one connection per sender")
	assert.Equal(t, uint64(5), recv.MessagesReceived)
	rec, _ := kind(snap, stats.KindReconnecting)
	assert.Equal(t, uint64(1), rec.Connections)
	require.Len(t, snap.Pools, 1)
	assert.Equal(t, []stats.Tier{{Size: 4096, Count: 4, Free: 4, MinFree: 4}}, snap.Pools[0].Tiers)
	require.Len(t, snap.Caches, 2, "the zero-copy endpoint's own and this one")
	require.Len(t, snap.Listeners, 1)
	assert.Equal(t, s.ln.Addr(), snap.Listeners[0].Addr)
	assert.Equal(t, 3, snap.ListenerTotals.Active)
	assert.NotEmpty(t, snap.Pollers)

	require.NoError(t, cache.Close())
	require.NoError(t, p.Close())
	require.NoError(t, rs.Close())
	require.NoError(t, zc.Close())
	require.NoError(t, s.snd.Close())
	// A receiving connection leaves the listener before it leaves the
	// snapshot (ReceiveEndpoint.teardown: retire, release, then the stats
	// entry), so wait for both.
	require.Eventually(t, func() bool {
		return len(s.ln.Connections()) == 0 && len(mgr.Snapshot().Endpoints) == 0
	}, waitFor, time.Millisecond)

	after := mgr.Snapshot()
	assert.Empty(t, after.Caches)
	assert.Empty(t, after.Pools)
	assert.Empty(t, after.Endpoints)
	for _, k := range after.Kinds {
		before, _ := kind(snap, k.Kind)
		assert.Zero(t, k.Live, k.Kind)
		assert.Equal(t, before.Counters, k.Counters, "%s: totals kept after close", k.Kind)
	}
	zk, _ := kind(after, stats.KindZeroCopy)
	assert.Equal(t, uint64(1), zk.Closed[stats.ReasonLocal])
}

// TestSnapshotRDMAndPubSub checks the connectionless kind and the
// publish/subscribe parts with their per-tag counters.
func TestSnapshotRDMAndPubSub(t *testing.T) {
	t.Run("rdm", func(t *testing.T) {
		mgr, err := domain.Open(domain.Config{Provider: "tcp;ofi_rxm", Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
		require.NoError(t, err)
		defer func() { assert.NoError(t, mgr.Close()) }()
		var got atomic.Int64
		rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) { got.Add(1) }})
		require.NoError(t, err)
		defer rx.Close()
		tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
		require.NoError(t, err)
		defer tx.Close()
		peer, err := tx.AddPeer(rx.Addr())
		require.NoError(t, err)
		buf := tx.GetBuffer()
		require.NotNil(t, buf)
		n := copy(buf.Bytes(), "fragment")
		require.Eventually(t, func() bool { return tx.SendBuffer(buf, n, peer) == netio.OK }, waitFor, time.Millisecond)
		require.Eventually(t, func() bool { return got.Load() == 1 }, waitFor, time.Millisecond)
		k, ok := kind(mgr.Snapshot(), stats.KindRDM)
		require.True(t, ok)
		assert.Equal(t, 2, k.Live)
		assert.Equal(t, uint64(1), k.MessagesSent)
		assert.Equal(t, uint64(n), k.BytesSent)
		assert.Equal(t, uint64(1), k.MessagesReceived)

		// Coalesced messages to a peer: three in one buffer, decoded there.
		var decoded atomic.Int64
		crx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{
			OnMessage: func(*rdm.Endpoint, rdm.Peer, uint64, []byte, uint8) { decoded.Add(1) }})
		require.NoError(t, err)
		defer crx.Close()
		ctx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
			Coalesce: &rdm.CoalesceConfig{FlushInterval: time.Hour}})
		require.NoError(t, err)
		defer ctx.Close()
		cpeer, err := ctx.AddPeer(crx.Addr())
		require.NoError(t, err)
		for tag := range uint64(3) {
			require.Equal(t, netio.OK, ctx.SendMessage(tag, []byte("small"), cpeer))
		}
		require.Eventually(t, func() bool { return ctx.Flush(cpeer) == netio.OK }, waitFor, time.Millisecond)
		require.Eventually(t, func() bool { return decoded.Load() == 3 }, waitFor, time.Millisecond)
		k, _ = kind(mgr.Snapshot(), stats.KindRDM)
		assert.Equal(t, uint64(3), k.CoalescedMessages)
		assert.Equal(t, uint64(1), k.CoalescedBuffers)
		assert.Equal(t, uint64(3), k.DecodedMessages)
	})
	t.Run("pubsub", func(t *testing.T) {
		mgr := openDomain(t)
		pub, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", pubsub.PublisherConfig{Tags: []uint64{1, 2}})
		require.NoError(t, err)
		defer pub.Close()
		var got atomic.Int64
		sub, err := pubsub.NewSubscriber(mgr, pubsub.SubscriberConfig{Bus: pubsub.Fixed(pub.Addr()),
			OnMessage: func(pubsub.Message) { got.Add(1) }})
		require.NoError(t, err)
		defer sub.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, sub.Subscribe(ctx, 1))
		require.Equal(t, pubsub.OK, pub.Publish(1, []byte("hello")))
		require.Equal(t, pubsub.NoSubscriptions, pub.Publish(2, []byte("nobody")))
		require.Eventually(t, func() bool { return got.Load() == 1 }, waitFor, time.Millisecond)
		snap := mgr.Snapshot()
		require.Len(t, snap.Publishers, 1)
		assert.Equal(t, []stats.PublisherTag{{Tag: 1, Published: 1, Delivered: 1}, {Tag: 2, Published: 1}}, snap.Publishers[0].Tags)
		require.Len(t, snap.Subscribers, 1)
		assert.Equal(t, uint64(1), snap.Subscribers[0].Messages)
		assert.Equal(t, []stats.SubscriberTag{{Tag: 1, Messages: 1, Bytes: 5}}, snap.Subscribers[0].Tags)
	})
}
