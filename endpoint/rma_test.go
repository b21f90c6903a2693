package endpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/pool"
)

// rmaPattern returns n bytes that differ at every offset of interest, seeded
// so that two patterns differ too.
func rmaPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ byte(i>>8) ^ seed
	}
	return b
}

// reply is what the server makes of the data it pulled.
func reply(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = ^c
	}
	return out
}

// TestRMAPullThenPushReply is the bulk-transfer scenario: the client
// exposes a request region (remote read) and a reply region (remote
// write) and sends both descriptors in a message; the server's OnData
// hands them to a goroutine that pulls the request into a registered
// buffer on the ReceiveEndpoint and pushes the reply back.
func TestRMAPullThenPushReply(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			pullThenPushReply(t, prov, func(server *domain.Manager, _ *endpoint.ListenConfig) borrowFunc {
				return func(size int) (*domain.Registration, []byte, func(), error) {
					buf, err := server.AllocRegistered(size, domain.AccessRead|domain.AccessWrite)
					if err != nil {
						return nil, nil, nil, err
					}
					return buf, mem(buf), func() { _ = buf.Close() }, nil
				}
			})
		})
	}
}

// TestRMAPullThenPushReplyPooled is the same scenario with the server's
// memory borrowed from pools: its receive buffers, and the buffer it pulls
// into and pushes from, a lease of the smallest fitting tier of a pool
// registered for local RMA. Every lease is back once the exchange is over.
func TestRMAPullThenPushReplyPooled(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			var rmaPool *pool.Pool
			pullThenPushReply(t, prov, func(server *domain.Manager, cfg *endpoint.ListenConfig) borrowFunc {
				cfg.Buffers = bufferPool(t, server, pool.Config{Access: domain.AccessRecv, Size: 4096, Count: 8})
				rmaPool = bufferPool(t, server, pool.Config{Access: domain.AccessRead | domain.AccessWrite,
					NumTiers: 3, PerTier: 1, FirstSize: 64 << 10, SizeMultiple: 4})
				return func(size int) (*domain.Registration, []byte, func(), error) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					b, err := rmaPool.Get(ctx, size)
					if err != nil {
						return nil, nil, nil, err
					}
					if b.Size() != 1<<20 {
						b.Release()
						return nil, nil, nil, fmt.Errorf("leased %d bytes for %d: not the smallest fitting tier", b.Size(), size)
					}
					return b.Registration(), b.Bytes(), b.Release, nil
				}
			})
			assert.Zero(t, inUse(rmaPool), "the RMA buffer is back in its pool")
		})
	}
}

// borrowFunc lends the server at least size bytes of memory registered
// for local RMA (its registration and its memory), and how to give them
// back.
type borrowFunc func(size int) (local *domain.Registration, mem []byte, giveBack func(), err error)

// pullThenPushReply runs the scenario on prov. setup may change the
// server's listener config and returns how the server borrows its RMA
// memory.
func pullThenPushReply(t *testing.T, prov string, setup func(server *domain.Manager, cfg *endpoint.ListenConfig) borrowFunc) {
	const size = 300_001 // not a multiple of anything
	server, client := openDomain(t, prov), openDomain(t, prov)
	require.True(t, server.SupportsRMA(), "%s should grant RMA", prov)

	type result struct {
		pulled, pushed int
		err            error
	}
	results := make(chan result, 1)
	var borrow borrowFunc
	cfg := endpoint.ListenConfig{
		RMA: endpoint.RMAParams{ChunkSize: 64 << 10}, // several chunks each way
		OnData: func(ep *endpoint.ReceiveEndpoint, data []byte) {
			var req, rep endpoint.RemoteRegion
			if err := errors.Join(req.UnmarshalBinary(data[:endpoint.RemoteRegionSize]),
				rep.UnmarshalBinary(data[endpoint.RemoteRegionSize:])); err != nil {
				results <- result{err: err}
				return
			}
			go func() { // OnData must not block: the transfers run here
				var r result
				defer func() { results <- r }()
				buf, local, giveBack, err := borrow(int(req.Len))
				if err != nil {
					r.err = err
					return
				}
				defer giveBack()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if r.pulled, r.err = ep.Pull(ctx, buf, 0, req, 0, int(req.Len)); r.err != nil {
					return
				}
				local = local[:req.Len]
				copy(local, reply(local))
				r.pushed, r.err = ep.Push(ctx, buf, 0, rep, 0, int(rep.Len))
			}()
		},
	}
	borrow = setup(server, &cfg)
	l := listen(t, server, cfg)

	request, err := endpoint.AllocExposed(client, size, domain.AccessRemoteRead)
	require.NoError(t, err)
	defer func() { assert.NoError(t, request.Close()) }()
	copy(request.Bytes(), rmaPattern(size, 1))
	replyMem := make([]byte, size) // Go memory, pinned while exposed
	replyRegion, err := endpoint.Expose(client, replyMem, domain.AccessRemoteWrite)
	require.NoError(t, err)
	defer func() { assert.NoError(t, replyRegion.Close()) }()

	s := dial(t, client, l.Addr(), endpoint.SendConfig{})
	buf := s.GetBuffer()
	require.NotNil(t, buf)
	msg, err := request.Descriptor().AppendBinary(buf.Bytes()[:0])
	require.NoError(t, err)
	msg, err = replyRegion.Descriptor().AppendBinary(msg)
	require.NoError(t, err)
	require.Equal(t, netio.OK, s.SendBuffer(buf, len(msg)))

	select {
	case r := <-results:
		require.NoError(t, r.err)
		assert.Equal(t, size, r.pulled)
		assert.Equal(t, size, r.pushed)
	case <-time.After(15 * time.Second):
		t.Fatal("no result from the server")
	}
	assert.True(t, bytes.Equal(reply(rmaPattern(size, 1)), replyMem), "reply content")
}

// rmaSetup is a target domain with a listener (whose poller makes the
// target's progress) and an initiator domain with an RMA endpoint to it.
type rmaSetup struct {
	target, init *domain.Manager
	ep           *endpoint.RMAEndpoint
}

func newRMASetup(t *testing.T, prov string, cfg endpoint.RMAConfig) *rmaSetup {
	t.Helper()
	s := &rmaSetup{target: openDomain(t, prov), init: openDomain(t, prov)}
	l := listen(t, s.target, newReceiver().config(netio.ReceiveParams{BufferCount: 4}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	s.ep, err = endpoint.DialRMA(ctx, s.init, l.Addr(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.ep.Close()) })
	return s
}

// expose exposes a region of the target filled with rmaPattern(size, seed).
func (s *rmaSetup) expose(t *testing.T, size int, access domain.Access, seed byte) *endpoint.ExposedRegion {
	t.Helper()
	r, err := endpoint.AllocExposed(s.target, size, access)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close()) })
	copy(r.Bytes(), rmaPattern(size, seed))
	return r
}

// local allocates registered memory in the initiator's domain.
func (s *rmaSetup) local(t *testing.T, size int, access domain.Access) *domain.Registration {
	t.Helper()
	r, err := s.init.AllocRegistered(size, access)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close()) })
	return r
}

// mem returns the first Len bytes of an allocated registration: its
// mapping is whole pages.
func mem(r *domain.Registration) []byte { return r.Bytes()[:r.Len()] }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRMAOffsets(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{})
			const size = 64 << 10
			remote := s.expose(t, size, domain.AccessRemoteRead|domain.AccessRemoteWrite, 3)
			want := rmaPattern(size, 3)
			local := s.local(t, size, domain.AccessRead|domain.AccessWrite)

			n, err := s.ep.Pull(testCtx(t), local, 300, remote.Descriptor(), 1000, 5000)
			require.NoError(t, err)
			assert.Equal(t, 5000, n)
			assert.Equal(t, want[1000:6000], mem(local)[300:5300])
			assert.Equal(t, make([]byte, 300), mem(local)[:300], "bytes before the local offset untouched")
			assert.Equal(t, make([]byte, size-5300), mem(local)[5300:], "bytes after the transfer untouched")

			// Push the pulled bytes to the region's last bytes.
			n, err = s.ep.Push(testCtx(t), local, 300, remote.Descriptor(), size-5000, 5000)
			require.NoError(t, err)
			assert.Equal(t, 5000, n)
			assert.Equal(t, want[1000:6000], remote.Bytes()[size-5000:])
			assert.Equal(t, want[:size-5000], remote.Bytes()[:size-5000], "bytes before the remote offset untouched")
		})
	}
}

// TestRMAChunked moves more than the chunk size with a small window, so
// that chunks wait for earlier ones, and checks the reassembled content.
func TestRMAChunked(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{Params: endpoint.RMAParams{ChunkSize: 4096, MaxInFlight: 3}})
			const size = 1<<20 + 123 // 257 chunks, the last one short
			remote := s.expose(t, size, domain.AccessRemoteRead|domain.AccessRemoteWrite, 5)
			local := s.local(t, size, domain.AccessRead|domain.AccessWrite)

			n, err := s.ep.Pull(testCtx(t), local, 0, remote.Descriptor(), 0, size)
			require.NoError(t, err)
			assert.Equal(t, size, n)
			assert.True(t, bytes.Equal(rmaPattern(size, 5), mem(local)), "pulled content")

			copy(mem(local), rmaPattern(size, 6))
			n, err = s.ep.Push(testCtx(t), local, 0, remote.Descriptor(), 0, size)
			require.NoError(t, err)
			assert.Equal(t, size, n)
			assert.True(t, bytes.Equal(rmaPattern(size, 6), remote.Bytes()), "pushed content")
		})
	}
}

// TestRMAAsync runs several transfers at once and waits for each.
func TestRMAAsync(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{Params: endpoint.RMAParams{ChunkSize: 8192, MaxInFlight: 4}})
			const part, parts = 40_000, 8
			remote := s.expose(t, part*parts, domain.AccessRemoteRead, 7)
			local := s.local(t, part*parts, domain.AccessRead)
			ops := make([]*endpoint.RMAOp, parts)
			for i := range ops {
				// In reverse order, so that local and remote offsets differ.
				var err error
				ops[i], err = s.ep.PullAsync(local, i*part, remote.Descriptor(), uint64((parts-1-i)*part), part)
				require.NoError(t, err)
			}
			want := rmaPattern(part*parts, 7)
			for i, op := range ops {
				n, err := op.Wait(testCtx(t))
				require.NoError(t, err)
				assert.Equal(t, part, n)
				assert.Equal(t, want[(parts-1-i)*part:(parts-i)*part], mem(local)[i*part:(i+1)*part], "part %d", i)
				n, err = op.Wait(testCtx(t)) // again: the same result
				assert.NoError(t, err)
				assert.Equal(t, part, n)
			}
		})
	}
}

// TestRMASyncConcurrent runs synchronous pulls and pushes from several
// goroutines at once, each on its own part of the regions, so that the
// operations the synchronous path reuses pass between goroutines; every
// result and every byte must be the goroutine's own.
func TestRMASyncConcurrent(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{Params: endpoint.RMAParams{ChunkSize: 4096, MaxInFlight: 4}})
			const part, workers, rounds = 10_000, 4, 30
			remote := s.expose(t, part*workers, domain.AccessRemoteRead|domain.AccessRemoteWrite, 0)
			local := s.local(t, part*workers, domain.AccessRead|domain.AccessWrite)
			errs := make(chan error, workers)
			for w := range workers {
				go func() {
					errs <- syncRounds(s.ep, local, remote, w*part, part-w, rounds, byte(w))
				}()
			}
			for range workers {
				assert.NoError(t, <-errs)
			}
		})
	}
}

// syncRounds pushes a pattern of n bytes to remote at off and pulls it
// back, rounds times with a new pattern each time, and reports the first
// mismatch. It runs on its own goroutine: no require.
func syncRounds(ep *endpoint.RMAEndpoint, local *domain.Registration, remote *endpoint.ExposedRegion, off, n, rounds int, seed byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	buf := mem(local)[off : off+n]
	for r := range rounds {
		want := rmaPattern(n, seed+byte(r)*16)
		copy(buf, want)
		if got, err := ep.Push(ctx, local, off, remote.Descriptor(), uint64(off), n); err != nil || got != n {
			return fmt.Errorf("push %d at %d: %d bytes, %v", r, off, got, err)
		}
		clear(buf)
		if got, err := ep.Pull(ctx, local, off, remote.Descriptor(), uint64(off), n); err != nil || got != n {
			return fmt.Errorf("pull %d at %d: %d bytes, %v", r, off, got, err)
		}
		if !bytes.Equal(want, buf) {
			return fmt.Errorf("round %d at %d: pulled content differs", r, off)
		}
	}
	return nil
}

// TestRMAWaitContext: a Wait whose context ends returns the context's
// error and leaves the transfer running; a later Wait gets its result.
// The endpoint's poller is held so that the transfer cannot complete
// before the contexts end.
func TestRMAWaitContext(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			init := openDomain(t, prov)
			p, err := cq.Open(init, cq.Config{})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, p.Close()) }) // after the endpoint's Close
			s := &rmaSetup{target: openDomain(t, prov), init: init}
			l := listen(t, s.target, newReceiver().config(netio.ReceiveParams{BufferCount: 4}))
			s.ep, err = endpoint.DialRMA(testCtx(t), init, l.Addr(), endpoint.RMAConfig{Runtime: cq.Runtime{Poller: p}})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, s.ep.Close()) })
			remote := s.expose(t, 4096, domain.AccessRemoteRead, 9)
			local := s.local(t, 4096, domain.AccessRead)

			held, release := make(chan struct{}), make(chan struct{})
			go poll.Of(p).Do(func() { close(held); <-release })
			<-held
			op, err := s.ep.PullAsync(local, 0, remote.Descriptor(), 0, 4096)
			if err != nil {
				close(release)
				require.NoError(t, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, werr := op.Wait(ctx)
			cancel()
			assert.ErrorIs(t, werr, context.DeadlineExceeded)
			ctx, cancel = context.WithCancel(context.Background())
			cancel()
			_, werr = op.Wait(ctx)
			assert.ErrorIs(t, werr, context.Canceled)
			// A synchronous Pull given up on: its operation goes on, and
			// must not be reused while it does.
			ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
			_, werr = s.ep.Pull(ctx, local, 0, remote.Descriptor(), 0, 4096)
			cancel()
			assert.ErrorIs(t, werr, context.DeadlineExceeded)
			select {
			case <-op.Done():
				t.Error("the operation finished while its poller was held")
			default:
			}
			close(release)

			n, err := op.Wait(testCtx(t))
			require.NoError(t, err)
			assert.Equal(t, 4096, n)
			assert.Equal(t, rmaPattern(4096, 9), mem(local))
			for i := range 3 { // later synchronous transfers are unaffected
				clear(mem(local))
				n, err = s.ep.Pull(testCtx(t), local, 0, remote.Descriptor(), uint64(i), 4096-i)
				require.NoError(t, err)
				assert.Equal(t, 4096-i, n)
				assert.Equal(t, rmaPattern(4096, 9)[i:], mem(local)[:4096-i], "pull %d", i)
			}
		})
	}
}

// TestRMACloseInFlight closes an endpoint with transfers in flight: each
// finishes, OK or canceled, and nothing stays registered.
func TestRMACloseInFlight(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{Params: endpoint.RMAParams{ChunkSize: 4096, MaxInFlight: 2}})
			remote := s.expose(t, 1<<20, domain.AccessRemoteRead, 1)
			local := s.local(t, 1<<20, domain.AccessRead)
			var ops []*endpoint.RMAOp
			for i := 0; i < 4; i++ {
				op, err := s.ep.PullAsync(local, i<<18, remote.Descriptor(), 0, 1<<18)
				require.NoError(t, err)
				ops = append(ops, op)
			}
			require.NoError(t, s.ep.Close())
			for _, op := range ops {
				_, err := op.Wait(testCtx(t))
				if err != nil {
					assert.ErrorIs(t, err, netio.ErrCanceled)
					assert.NotErrorIs(t, err, netio.ErrConnectionClosed, "canceled by our Close, not by the peer")
				}
			}
			_, err := s.ep.PullAsync(local, 0, remote.Descriptor(), 0, 1)
			assert.ErrorIs(t, err, netio.ErrClosed)
		})
	}
}

func TestRemoteRegionBinary(t *testing.T) {
	d := endpoint.RemoteRegion{Addr: 0x1122334455667788, Len: 4096, Key: 0xdeadbeefcafe, Access: domain.AccessRemoteRead | domain.AccessRemoteWrite}
	b, err := d.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, endpoint.RemoteRegionSize)
	assert.Equal(t, "NRMR", string(b[:4]))
	assert.Equal(t, byte(1), b[4], "version")
	assert.Equal(t, d.Addr, binary.LittleEndian.Uint64(b[8:]), "little-endian Addr at 8")
	var got endpoint.RemoteRegion
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, d, got)

	corrupt := func(name string, f func([]byte) []byte) {
		t.Run(name, func(t *testing.T) {
			c := f(append([]byte(nil), b...))
			keep := endpoint.RemoteRegion{Len: 1}
			err := keep.UnmarshalBinary(c)
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			assert.Equal(t, endpoint.RemoteRegion{Len: 1}, keep, "unchanged on error")
		})
	}
	corrupt("empty", func([]byte) []byte { return nil })
	corrupt("short", func(c []byte) []byte { return c[:39] })
	corrupt("long", func(c []byte) []byte { return append(c, 0) })
	corrupt("magic", func(c []byte) []byte { c[0] = 'X'; return c })
	corrupt("version", func(c []byte) []byte { c[4] = 2; return c })
	corrupt("padding", func(c []byte) []byte { c[6] = 1; return c })
	corrupt("zero length", func(c []byte) []byte { binary.LittleEndian.PutUint64(c[16:], 0); return c })
	corrupt("wrapping", func(c []byte) []byte { binary.LittleEndian.PutUint64(c[16:], ^uint64(0)); return c })
	corrupt("no access", func(c []byte) []byte { binary.LittleEndian.PutUint64(c[32:], 0); return c })
	corrupt("local access", func(c []byte) []byte {
		binary.LittleEndian.PutUint64(c[32:], uint64(domain.AccessRemoteRead|domain.AccessSend))
		return c
	})

	_, err = endpoint.RemoteRegion{Len: 0, Access: domain.AccessRemoteRead}.MarshalBinary()
	assert.ErrorIs(t, err, netio.ErrInvalidArgument, "a descriptor that would not parse is not marshalled")
}

func TestExposeArguments(t *testing.T) {
	mgr := openDomain(t, "tcp")
	for _, tc := range []struct {
		name   string
		mem    []byte
		access domain.Access
	}{
		{"empty", nil, domain.AccessRemoteRead},
		{"no access", make([]byte, 8), 0},
		{"local access", make([]byte, 8), domain.AccessRemoteRead | domain.AccessRead},
		{"send access", make([]byte, 8), domain.AccessSend},
	} {
		_, err := endpoint.Expose(mgr, tc.mem, tc.access)
		assert.ErrorIs(t, err, netio.ErrInvalidArgument, tc.name)
	}
	_, err := endpoint.AllocExposed(mgr, 0, domain.AccessRemoteRead)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = endpoint.Expose(nil, make([]byte, 8), domain.AccessRemoteRead)
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)

	r, err := endpoint.Expose(mgr, make([]byte, 100), domain.AccessRemoteWrite)
	require.NoError(t, err)
	assert.Equal(t, uint64(100), r.Descriptor().Len)
	assert.Equal(t, domain.AccessRemoteWrite, r.Descriptor().Access, "least access: only what was asked")
	assert.NoError(t, r.Close())
	assert.NoError(t, r.Close(), "idempotent")
}

// TestRMAOutOfRange: requests outside the exposed region or the local
// registration are refused up front and post nothing.
func TestRMAOutOfRange(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{})
			remote := s.expose(t, 1000, domain.AccessRemoteRead|domain.AccessRemoteWrite, 2)
			local := s.local(t, 2000, domain.AccessRead|domain.AccessWrite)
			copy(mem(local), rmaPattern(2000, 4))
			d := remote.Descriptor()
			other := openDomain(t, prov)
			foreign, err := other.AllocRegistered(100, domain.AccessRead)
			require.NoError(t, err)
			defer func() { assert.NoError(t, foreign.Close()) }()

			for _, tc := range []struct {
				name      string
				local     *domain.Registration
				localOff  int
				remote    endpoint.RemoteRegion
				remoteOff uint64
				length    int
			}{
				{"more than exposed", local, 0, d, 0, 1001},
				{"past the end", local, 0, d, 999, 2},
				{"offset past the end", local, 0, d, 1001, 1},
				{"huge offset", local, 0, d, ^uint64(0), 1},
				{"zero length", local, 0, d, 0, 0},
				{"negative length", local, 0, d, 0, -1},
				{"past the local end", local, 1999, d, 0, 2},
				{"negative local offset", local, -1, d, 0, 1},
				{"nil local", nil, 0, d, 0, 1},
				{"local of another domain", foreign, 0, d, 0, 1},
				{"invalid descriptor", local, 0, endpoint.RemoteRegion{Len: 10}, 0, 1},
			} {
				_, err := s.ep.Pull(testCtx(t), tc.local, tc.localOff, tc.remote, tc.remoteOff, tc.length)
				assert.ErrorIs(t, err, netio.ErrInvalidArgument, "pull: "+tc.name)
				_, err = s.ep.PushAsync(tc.local, tc.localOff, tc.remote, tc.remoteOff, tc.length)
				assert.ErrorIs(t, err, netio.ErrInvalidArgument, "push: "+tc.name)
			}
			assert.Equal(t, rmaPattern(1000, 2), remote.Bytes(), "nothing was pushed")

			n, err := s.ep.Push(testCtx(t), local, 1000, d, 0, 1000) // exactly the region: fine
			require.NoError(t, err)
			assert.Equal(t, 1000, n)
			assert.Equal(t, rmaPattern(2000, 4)[1000:], remote.Bytes())
		})
	}
}

// TestRMAAccessDenied: access the descriptor does not grant is refused up
// front; access the registration does not grant, with a forged
// descriptor, is refused by the provider and reported as an error.
func TestRMAAccessDenied(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newRMASetup(t, prov, endpoint.RMAConfig{})
			readOnly := s.expose(t, 4096, domain.AccessRemoteRead, 8)
			writeOnly := s.expose(t, 4096, domain.AccessRemoteWrite, 9)
			local := s.local(t, 4096, domain.AccessRead|domain.AccessWrite)
			sendOnly := s.local(t, 4096, domain.AccessSend)

			_, err := s.ep.Push(testCtx(t), local, 0, readOnly.Descriptor(), 0, 4096)
			assert.ErrorIs(t, err, endpoint.ErrAccessDenied)
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			_, err = s.ep.Pull(testCtx(t), local, 0, writeOnly.Descriptor(), 0, 4096)
			assert.ErrorIs(t, err, endpoint.ErrAccessDenied)
			_, err = s.ep.Pull(testCtx(t), sendOnly, 0, readOnly.Descriptor(), 0, 4096)
			assert.ErrorIs(t, err, endpoint.ErrAccessDenied, "local memory without AccessRead")
			_, err = s.ep.Push(testCtx(t), sendOnly, 0, writeOnly.Descriptor(), 0, 4096)
			assert.ErrorIs(t, err, endpoint.ErrAccessDenied, "local memory without AccessWrite")

			// The provider's checks, with descriptors that lie.
			forged := readOnly.Descriptor()
			forged.Access |= domain.AccessRemoteWrite
			t.Run("forged access", func(t *testing.T) { pushDenied(t, prov, forged, readOnly) })
			forged = writeOnly.Descriptor()
			forged.Key ^= 0x5a5a5a5a
			t.Run("forged key", func(t *testing.T) { pushDenied(t, prov, forged, writeOnly) })
		})
	}
}

// pushDenied pushes into target with a descriptor its registration does
// not allow, on a connection of its own: sockets reports an error
// completion (FI_EACCES). tcp in libfabric 1.17 checks the key on the
// target and, when it fails, closes the connection without a word to the
// initiator; that looks exactly like a peer that went away, so the push
// cannot honestly be called access denied: it ends canceled by the
// connection's end, which the error says. Either way the target's memory
// is unchanged.
func pushDenied(t *testing.T, prov string, forged endpoint.RemoteRegion, target *endpoint.ExposedRegion) {
	closed := make(chan error, 1)
	s := newRMASetup(t, prov, endpoint.RMAConfig{OnConnectionClosed: func(err error) { closed <- err }})
	local := s.local(t, 4096, domain.AccessWrite)
	before := append([]byte(nil), target.Bytes()...)
	n, err := s.ep.Push(testCtx(t), local, 0, forged, 0, 4096)
	t.Logf("%s: n=%d err=%v", prov, n, err)
	require.Error(t, err, "the provider must refuse the push")
	assert.Zero(t, n)
	switch prov {
	case "tcp":
		assert.ErrorIs(t, err, netio.ErrCanceled)
		assert.ErrorIs(t, err, netio.ErrConnectionClosed, "canceled by the connection's end, not by a Close")
		assert.NotErrorIs(t, err, endpoint.ErrAccessDenied, "tcp does not say why it closed")
		assert.ErrorIs(t, recvErr(t, closed, 5*time.Second, "connection closed"), netio.ErrConnectionClosed)
	default:
		assert.ErrorIs(t, err, netio.ErrFailed)
		assert.ErrorIs(t, err, endpoint.ErrAccessDenied)
	}
	assert.Equal(t, before, target.Bytes(), "the target's memory is unchanged")
}

func TestRMAUnsupportedArguments(t *testing.T) {
	mgr := openDomain(t, "tcp")
	_, err := endpoint.DialRMA(context.Background(), mgr, "127.0.0.1:1", endpoint.RMAConfig{Params: endpoint.RMAParams{ChunkSize: -1}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = endpoint.DialRMA(context.Background(), nil, "127.0.0.1:1", endpoint.RMAConfig{})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
	_, err = endpoint.DialRMA(context.Background(), mgr, "nonsense", endpoint.RMAConfig{})
	assert.ErrorIs(t, err, netio.ErrBadAddress)
	_, err = endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {},
		RMA: endpoint.RMAParams{MaxInFlight: -1}})
	assert.ErrorIs(t, err, netio.ErrInvalidArgument)
}

// ExampleExpose shows the descriptor a peer receives.
func ExampleExpose() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()
	region, err := endpoint.AllocExposed(mgr, 1<<20, domain.AccessRemoteRead)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer region.Close()
	msg, _ := region.Descriptor().MarshalBinary() // send this to the peer
	var d endpoint.RemoteRegion
	fmt.Println(d.UnmarshalBinary(msg), d.Len, d.Access == domain.AccessRemoteRead)
	// Output: <nil> 1048576 true
}
