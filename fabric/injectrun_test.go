package fabric_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// TestInjectRunToRefusesBadInput: InjectRunTo refuses mismatched offset
// and length lists, an empty run, a length past InjectSize and a message
// past mem with EINVAL before it injects any of the run, so the first
// message to arrive is the good run's first that follows. On a connected
// endpoint fi_inject ignores dest, as it does in the fabric tests'
// pairs.
func TestInjectRunToRefusesBadInput(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			srv, cep, rbuf := receivingPair(t, prov)
			size := uint32(cep.InjectSize())
			require.Positive(t, size)
			mem := bytes.Repeat([]byte{0xa5}, int(2*size+1))
			mem[size] = 0x5a
			for name, run := range map[string][2][]uint32{
				"mismatched":            {{0, size}, {size}},
				"empty":                 {{}, {}},
				"past inject size last": {{0, size}, {size, size + 1}},
				"past mem":              {{0, size + 2}, {size, size}},
				"offset past mem":       {{0, uint32(len(mem))}, {1, 1}},
				"offset wraps":          {{0, 1<<32 - 1}, {1, 2}},
			} {
				n, errno := cep.InjectRunTo(mem, run[0], run[1], 0)
				assert.Zero(t, n, name)
				assert.Equal(t, fabric.EINVAL, errno, name)
			}
			n, errno := cep.InjectRunTo(mem, []uint32{size, 0}, []uint32{size, size}, 0)
			require.Zero(t, errno)
			require.Equal(t, 2, n, "a good run is taken whole")
			c, ce := waitCompletion(t, srv, 5*time.Second)
			require.Nil(t, ce)
			assert.Equal(t, uint64(size), c.Len, "the first message to arrive is the good run's first")
			assert.Equal(t, mem[size:2*size], rbuf[:c.Len])
		})
	}
}

// TestInjectRunToClosedEndpoint: a closed (or never opened) endpoint's InjectRunTo reports
// EBADF and took nothing, as InjectTo does.
func TestInjectRunToClosedEndpoint(t *testing.T) {
	c := openAndClose(t, openStack(t, "tcp"))
	buf := make([]byte, 64)
	n, errno := c.ep.InjectRunTo(buf, []uint32{0}, []uint32{64}, 0)
	assert.Zero(t, n)
	assert.Equal(t, fabric.EBADF, errno)
	assert.Equal(t, fabric.EBADF, c.ep.InjectTo(buf, 0))
	n, errno = new(fabric.Endpoint).InjectRunTo(buf, []uint32{0}, []uint32{64}, 0)
	assert.Zero(t, n, "an endpoint never opened")
	assert.Equal(t, fabric.EBADF, errno)
}

// TestInjectRunToRefusedMidRun: injecting runs to a peer that posts no
// receive until the provider refuses one ends with EAGAIN (not a packing
// of count and errno that loses either); once the peer has taken a few
// messages, runs go on until one is refused mid-run, after a count above
// 0 (tried until it happens, bounded); and the peer then receives exactly the injects counted
// taken, no more. sockets only: tcp takes 64 Ki runs to a peer that does
// not read without refusing one.
func TestInjectRunToRefusedMidRun(t *testing.T) {
	for _, prov := range []string{"sockets"} {
		t.Run(prov, func(t *testing.T) {
			srv, cli := openStack(t, prov), openStack(t, prov)
			var sep *fabric.Endpoint
			cep := connectPair(t, srv, cli, func(ep *fabric.Endpoint) { sep = ep })
			const run = 64
			size := cep.InjectSize()
			mem := make([]byte, run*size)
			off, lens := make([]uint32, run), make([]uint32, run)
			for i := range off {
				off[i], lens[i] = uint32(i*size), uint32(size)
			}
			rbuf := mmap(t, size)
			received := 0
			receiveOne := func() {
				require.Zero(t, sep.Recv(addr(rbuf), size, 0, uint64(received)))
				c, ce := waitCompletion(t, srv, 5*time.Second)
				require.Nil(t, ce)
				require.Equal(t, uint64(received), c.Context)
				received++
			}
			taken, n, errno := 0, 0, fabric.Errno(0)
			for range 1 << 16 {
				if n, errno = cep.InjectRunTo(mem, off[:7], lens[:7], 0); errno != 0 {
					break
				}
				taken += n
			}
			taken += n
			require.Equal(t, fabric.EAGAIN, errno, "the provider refuses once its queue is full")
			assert.Less(t, n, 7)
			midRun := 0
			for range 1000 { // the peer takes one; the provider sends more
				receiveOne()
				time.Sleep(time.Millisecond) // for its progress thread
				for range 1 << 10 {
					if n, errno = cep.InjectRunTo(mem, off, lens, 0); errno != 0 {
						break
					}
					taken += n
				}
				taken += n
				require.Equal(t, fabric.EAGAIN, errno)
				if n > 0 {
					midRun = n
					break
				}
			}
			require.Positive(t, midRun, "no run was refused after some of its injects")
			for received < taken {
				receiveOne()
			}
			require.Zero(t, sep.Recv(addr(rbuf), size, 0, 1<<40))
			n, _, errno = srv.cq.Read()
			require.Zero(t, errno)
			time.Sleep(50 * time.Millisecond)
			if n == 0 {
				n, _, errno = srv.cq.Read()
				require.Zero(t, errno)
			}
			assert.Zero(t, n, "nothing arrives beyond the injects counted taken")
			t.Logf("refused mid-run after %d of %d; %d injects taken, as many received", midRun, run, taken)
		})
	}
}
