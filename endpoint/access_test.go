package endpoint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/pool"
	"github.com/netio-go/netio/sendbuf"
)

// accessCounts counts a domain's live registrations by access.
func accessCounts(m *domain.Manager) map[domain.Access]int {
	n := map[domain.Access]int{}
	for _, r := range m.Registrations() {
		n[r.Access]++
	}
	return n
}

// TestLeastAccess runs every kind of endpoint, with every source of
// buffers, between a sending and a receiving domain, and checks what the
// domains registered: the sender's memory for sending only, the receiver's
// for receiving only, and remote read or write nowhere but on the regions
// the test exposes, with exactly the access asked for.
func TestLeastAccess(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			tx, rx := openDomain(t, prov), openDomain(t, prov)
			recvPool := bufferPool(t, rx, pool.Config{Size: 4096, Access: domain.AccessRecv})
			sendPool := bufferPool(t, tx, pool.Config{Size: 4096})
			shared, err := sendbuf.NewSendBufferManager(tx, netio.BufferedSendParams{BufferSize: 256, BufferCount: 2})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, shared.Close()) })

			rcv := newReceiver()
			params := netio.ReceiveParams{BufferSize: 4096, BufferCount: 4}
			own := listen(t, rx, rcv.config(params))
			pooledCfg := rcv.config(params)
			pooledCfg.Buffers = recvPool
			pooled := listen(t, rx, pooledCfg)

			small := netio.BufferedSendParams{BufferSize: 256, BufferCount: 2}
			senders := []*endpoint.SendEndpointBuffered{
				dial(t, tx, own.Addr(), endpoint.SendConfig{Params: small}),
				dial(t, tx, pooled.Addr(), endpoint.SendConfig{Params: small, Buffers: sendbuf.Pooled(sendPool)}),
				dial(t, tx, own.Addr(), endpoint.SendConfig{Buffers: sendbuf.Shared(shared)}),
			}
			for _, s := range senders {
				buf := s.GetBuffer()
				require.NotNil(t, buf)
				require.Equal(t, netio.OK, s.SendBuffer(buf, 8))
			}
			region, goData := make([]byte, 4096), make([]byte, 512)
			zc := dialZeroCopy(t, tx, pooled.Addr(), endpoint.ZeroCopyConfig{Region: region})
			require.Equal(t, netio.OK, zc.Send([]byte("hdr"), region[:100], 1))
			require.Equal(t, netio.OK, zc.Send([]byte("hdr"), goData, 2), "registered through the cache")
			rma := newRMASetup(t, prov, endpoint.RMAConfig{})
			waitFor(t, 10*time.Second, func() bool { return rcv.count.Load() == int64(len(senders)+2) }, "every message")

			assert.Equal(t, map[domain.Access]int{domain.AccessSend: len(tx.Registrations())}, accessCounts(tx),
				"the sender registers for sending only")
			assert.Equal(t, map[domain.Access]int{domain.AccessRecv: len(rx.Registrations())}, accessCounts(rx),
				"the receiver registers for receiving only")
			assert.Empty(t, rma.init.Registrations(), "an RMA endpoint registers nothing of its own")
			assert.Equal(t, map[domain.Access]int{domain.AccessRecv: len(rma.target.Registrations())}, accessCounts(rma.target))

			readable, err := endpoint.Expose(rx, make([]byte, 1000), domain.AccessRemoteRead)
			require.NoError(t, err)
			defer func() { assert.NoError(t, readable.Close()) }()
			writable, err := endpoint.AllocExposed(rx, 3000, domain.AccessRemoteWrite)
			require.NoError(t, err)
			defer func() { assert.NoError(t, writable.Close()) }()
			remote := map[domain.Access]int{}
			for _, r := range rx.Registrations() {
				if r.Access&(domain.AccessRemoteRead|domain.AccessRemoteWrite) != 0 {
					remote[r.Access] += r.Len
				}
			}
			assert.Equal(t, map[domain.Access]int{domain.AccessRemoteRead: 1000, domain.AccessRemoteWrite: 3000}, remote,
				"remote access exists on the exposed regions only, as asked")
			assert.Equal(t, domain.AccessRemoteRead, readable.Descriptor().Access)
			assert.Equal(t, domain.AccessRemoteWrite, writable.Descriptor().Access)
		})
	}
}
