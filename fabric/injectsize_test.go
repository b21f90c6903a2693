package fabric_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// receivingPair connects a client endpoint (returned) to a server on srv
// that posted one receive of 4 KiB into rbuf.
func receivingPair(t *testing.T, prov string) (srv *stack, cep *fabric.Endpoint, rbuf []byte) {
	t.Helper()
	srv, cli := openStack(t, prov), openStack(t, prov)
	rbuf = mmap(t, 4096)
	rmr, err := srv.dom.RegisterMemory(addr(rbuf), len(rbuf), fabric.AccessRecv, 1)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rmr.Close()) })
	cep = connectPair(t, srv, cli, func(sep *fabric.Endpoint) {
		require.Zero(t, sep.Recv(addr(rbuf), len(rbuf), rmr.Desc(), 1))
	})
	return srv, cep, rbuf
}

// TestInjectRefusesPastInjectSize: Inject and InjectCounted refuse a
// message one byte past the endpoint's InjectSize with EINVAL and send
// nothing (tcp would keep a pointer to the caller's memory past 128
// bytes), while one of exactly InjectSize bytes arrives whole.
func TestInjectRefusesPastInjectSize(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			srv, cep, rbuf := receivingPair(t, prov)
			size := cep.InjectSize()
			require.Positive(t, size)
			require.Less(t, size, len(rbuf))
			msg := bytes.Repeat([]byte{0xa5}, size+1)
			assert.Equal(t, fabric.EINVAL, cep.Inject(msg), "one byte past the inject size")
			assert.Equal(t, fabric.EINVAL, cep.InjectCounted(msg, 0))
			require.Zero(t, cep.Inject(msg[:size]), "exactly the inject size")
			c, ce := waitCompletion(t, srv, 5*time.Second)
			require.Nil(t, ce)
			assert.Equal(t, uint64(size), c.Len, "the first message to arrive is the one sent")
			assert.Equal(t, msg[:size], rbuf[:c.Len])
		})
	}
}
