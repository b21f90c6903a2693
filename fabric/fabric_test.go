package fabric_test

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/netio-go/netio/fabric"
)

var providers = []string{"tcp", "sockets"}

// stack is a fabric, domain, EQ and CQ opened for one provider on loopback.
type stack struct {
	info *fabric.Info
	fab  *fabric.Fabric
	dom  *fabric.Domain
	eq   *fabric.EQ
	cq   *fabric.CQ
}

func openStack(t testing.TB, prov string) *stack {
	t.Helper()
	info, err := fabric.GetInfo(fabric.Hints{Provider: prov, Node: "127.0.0.1", Service: "0", Source: true})
	require.NoError(t, err)
	s := &stack{info: info}
	s.fab, err = fabric.OpenFabric(info)
	require.NoError(t, err)
	s.dom, err = s.fab.OpenDomain(info)
	require.NoError(t, err)
	s.eq, err = s.fab.OpenEQ(64, true)
	require.NoError(t, err)
	s.cq, err = s.dom.OpenCQ(256, true)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.cq.Close())
		assert.NoError(t, s.eq.Close())
		assert.NoError(t, s.dom.Close())
		assert.NoError(t, s.fab.Close())
		s.info.Free()
	})
	return s
}

// waitEvent blocks on the EQ's wait fd (after fi_trywait) until an event
// arrives or the timeout passes.
func waitEvent(t testing.TB, s *stack, timeout time.Duration) fabric.Event {
	t.Helper()
	ev := waitEventNoFail(s, timeout)
	if ev.Kind == fabric.EventError && ev.Context == 0 {
		require.NoError(t, ev.Err)
	}
	return ev
}

// waitEventNoFail is waitEvent for a spawned goroutine: it reports failure
// as an EventError instead of failing the test from the wrong goroutine.
func waitEventNoFail(s *stack, timeout time.Duration) fabric.Event {
	// tcp notices a peer's shutdown while progressing the CQ, so the wait
	// covers both queues, as the library's poller does.
	fd, err := s.eq.WaitFD()
	if err != nil {
		return fabric.Event{Kind: fabric.EventError, Err: err}
	}
	// A CQ opened without a wait object (BenchmarkRawStream's) cannot be
	// waited on: poll the event queue instead.
	cqfd, err := s.cq.WaitFD()
	canWait := err == nil
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ev, ok, err := s.eq.Read()
		if err != nil {
			return fabric.Event{Kind: fabric.EventError, Err: err}
		}
		if ok {
			return ev
		}
		if !canWait {
			time.Sleep(100 * time.Microsecond)
		} else if s.fab.TryWait(s.eq, s.cq) {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(cqfd), Events: unix.POLLIN}}, 100)
		}
	}
	return fabric.Event{Kind: fabric.EventError, Err: errors.New("timeout")}
}

func waitCompletion(t *testing.T, s *stack, timeout time.Duration) (fabric.Completion, *fabric.CompletionError) {
	t.Helper()
	fd, err := s.cq.WaitFD()
	require.NoError(t, err)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, avail, errno := s.cq.Read()
		require.Zero(t, errno)
		if n > 0 {
			return s.cq.Entry(0), nil
		}
		if avail {
			ce, ok := s.cq.ReadError()
			require.True(t, ok)
			return fabric.Completion{}, &ce
		}
		if s.fab.TryWait(s.cq, nil) {
			_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 100)
		}
	}
	t.Fatalf("no completion within %v", timeout)
	return fabric.Completion{}, nil
}

func mmap(t testing.TB, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, unix.Munmap(b)) })
	return b
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

func TestConnectSendReceive(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			srv, cli := openStack(t, prov), openStack(t, prov)

			pep, err := srv.fab.OpenPassiveEndpoint(srv.info, 7)
			require.NoError(t, err)
			defer pep.Close()
			require.NoError(t, pep.Bind(srv.eq))
			require.NoError(t, pep.Listen())
			bound, err := pep.Addr()
			require.NoError(t, err)
			host, port, err := net.SplitHostPort(bound)
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", host)
			assert.NotEqual(t, "0", port, "port 0 must be replaced by the bound port")

			dest, err := fabric.GetInfo(fabric.Hints{Provider: prov, Node: host, Service: port, Fabric: cli.info.FabricName(), Domain: cli.info.DomainName()})
			require.NoError(t, err)
			defer dest.Free()
			cep := openBound(t, cli, dest, 11)
			require.NoError(t, cep.Connect(dest))
			// tcp makes connection progress only while the connecting side
			// reads or waits on its queue: wait for it concurrently, as the
			// library's per-side pollers do.
			clientEvent := make(chan fabric.Event, 1)
			go func() { clientEvent <- waitEventNoFail(cli, 5*time.Second) }()

			req := waitEvent(t, srv, 5*time.Second)
			require.Equal(t, fabric.EventConnReq, req.Kind)
			assert.Equal(t, uint64(7), req.Context, "a connection request carries the passive endpoint's context")
			require.NotNil(t, req.Info)
			// sockets names no provider in a connection request's info;
			// the EQ gives it the fabric's (EQ.nameProvider).
			assert.Equal(t, prov, req.Info.Provider(), "an accepted connection's info says its provider")
			sep := openBound(t, srv, req.Info, 21)
			req.Info.Free()

			rbuf := mmap(t, 4096)
			rmr, err := srv.dom.RegisterMemory(addr(rbuf), len(rbuf), fabric.AccessRecv, 1)
			require.NoError(t, err)
			defer rmr.Close()
			require.Zero(t, sep.Recv(addr(rbuf), len(rbuf), rmr.Desc(), 0x1234))
			require.NoError(t, sep.Accept())

			ev := waitEvent(t, srv, 5*time.Second)
			assert.Equal(t, fabric.EventConnected, ev.Kind)
			assert.Equal(t, uint64(21), ev.Context)
			ev = <-clientEvent
			assert.Equal(t, fabric.EventConnected, ev.Kind)
			assert.Equal(t, uint64(11), ev.Context)

			postSend(t, cli, cep, "hello, fabric", 0xabcd)

			c, cerr := waitCompletion(t, cli, 5*time.Second)
			require.Nil(t, cerr)
			assert.Equal(t, uint64(0xabcd), c.Context)
			assert.NotZero(t, c.Flags&fabric.FlagSend)
			c, cerr = waitCompletion(t, srv, 5*time.Second)
			require.Nil(t, cerr)
			assert.Equal(t, uint64(0x1234), c.Context)
			assert.NotZero(t, c.Flags&fabric.FlagRecv)
			assert.Equal(t, uint64(13), c.Len)
			assert.Equal(t, "hello, fabric", string(rbuf[:c.Len]))

			// Shutting one side down reports a shutdown event on the other.
			require.NoError(t, cep.Shutdown())
			ev = waitEvent(t, srv, 5*time.Second)
			assert.Equal(t, fabric.EventShutdown, ev.Kind)
			assert.Equal(t, uint64(21), ev.Context)
		})
	}
}

func TestConnectRefused(t *testing.T) {
	// A port that was just free: listen, note it, close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	require.NoError(t, l.Close())
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			cli := openStack(t, prov)
			dest, err := fabric.GetInfo(fabric.Hints{Provider: prov, Node: "127.0.0.1", Service: port, Fabric: cli.info.FabricName(), Domain: cli.info.DomainName()})
			require.NoError(t, err)
			defer dest.Free()
			ep, err := cli.dom.OpenEndpoint(dest, 5)
			require.NoError(t, err)
			defer ep.Close()
			require.NoError(t, ep.BindEQ(cli.eq))
			require.NoError(t, ep.BindCQ(cli.cq, fabric.BindTransmit|fabric.BindRecv))
			require.NoError(t, ep.Enable())
			err = ep.Connect(dest)
			if err == nil {
				ev := waitEvent(t, cli, 5*time.Second)
				require.Equal(t, fabric.EventError, ev.Kind, "got %v", ev.Kind)
				err = ev.Err
			}
			t.Logf("refused: %v", err)
			assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "got %v", err)
		})
	}
}

func TestGetInfoUnknownProvider(t *testing.T) {
	_, err := fabric.GetInfo(fabric.Hints{Provider: "no-such-provider", Node: "127.0.0.1", Source: true})
	require.Error(t, err)
	var op *fabric.OpError
	require.ErrorAs(t, err, &op)
	assert.Equal(t, "fi_getinfo", op.Op)
	assert.Contains(t, err.Error(), "fi_getinfo")
}

func TestErrnoText(t *testing.T) {
	assert.Equal(t, "success", fabric.Errno(0).Error())
	assert.NotEmpty(t, fabric.ETRUNC.Error())
	assert.True(t, errors.Is(fabric.ECONNREFUSED, syscall.ECONNREFUSED))
	assert.False(t, errors.Is(fabric.ETRUNC, syscall.ECONNREFUSED))
	assert.True(t, fabric.EAGAIN.Temporary())
	assert.False(t, fabric.ETRUNC.Temporary())
}

func TestVersion(t *testing.T) {
	assert.Regexp(t, `^1\.\d+$`, fabric.Version())
}

// TestReadSpin: ReadSpin keeps polling an empty queue for its whole slice,
// and returns as soon as a completion arrives, with that completion.
func TestReadSpin(t *testing.T) {
	s := openStack(t, "tcp")
	start := time.Now()
	n, avail, errno := s.cq.ReadSpin(3 * time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), 3*time.Millisecond, "an empty queue is polled for the whole slice")
	assert.Zero(t, n)
	assert.False(t, avail)
	assert.Zero(t, errno)

	srv, cli := s, openStack(t, "tcp")
	rbuf := mmap(t, 4096)
	rmr, err := srv.dom.RegisterMemory(addr(rbuf), len(rbuf), fabric.AccessRecv, 1)
	require.NoError(t, err)
	defer rmr.Close()
	cep := connectPair(t, srv, cli, func(sep *fabric.Endpoint) {
		require.Zero(t, sep.Recv(addr(rbuf), len(rbuf), rmr.Desc(), 0x77))
	})
	postSend(t, cli, cep, "spun", 0x88)

	// The client's side must make progress too (tcp sends from its CQ
	// reads when the socket was busy), so read it while the server spins.
	clientDone := make(chan fabric.Errno, 1)
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			n, _, errno := cli.cq.Read()
			if n > 0 || errno != 0 {
				clientDone <- errno
				return
			}
		}
		clientDone <- fabric.ETIMEDOUT
	}()
	start = time.Now()
	for n == 0 && time.Since(start) < 10*time.Second {
		n, avail, errno = srv.cq.ReadSpin(10 * time.Second)
	}
	assert.Less(t, time.Since(start), 10*time.Second, "ReadSpin returns when a completion arrives, not at the end of its slice")
	require.Equal(t, 1, n)
	assert.False(t, avail)
	assert.Zero(t, errno)
	c := srv.cq.Entry(0)
	assert.Equal(t, uint64(0x77), c.Context)
	assert.Equal(t, uint64(4), c.Len)
	assert.Equal(t, "spun", string(rbuf[:4]))
	assert.Zero(t, <-clientDone)
}

// connectPair connects a client endpoint on cli to a server endpoint on
// srv, both bound to their stack's queues; beforeAccept runs on the
// server's endpoint before it accepts (to post receives). The endpoints
// are closed at the end of the test; the client's is returned.
func connectPair(t testing.TB, srv, cli *stack, beforeAccept func(*fabric.Endpoint)) *fabric.Endpoint {
	t.Helper()
	return connectPairWith(t, srv, cli, func(dest *fabric.Info) *fabric.Endpoint { return openBound(t, cli, dest, 2) }, beforeAccept)
}

// connectPairWith is connectPair with the client's endpoint opened, bound
// and enabled by openClient (closed at the end of the test too).
func connectPairWith(t testing.TB, srv, cli *stack, openClient func(dest *fabric.Info) *fabric.Endpoint, beforeAccept func(*fabric.Endpoint)) *fabric.Endpoint {
	t.Helper()
	pep, err := srv.fab.OpenPassiveEndpoint(srv.info, 1)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pep.Close()) })
	require.NoError(t, pep.Bind(srv.eq))
	require.NoError(t, pep.Listen())
	bound, err := pep.Addr()
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(bound)
	require.NoError(t, err)
	dest, err := fabric.GetInfo(fabric.Hints{Provider: cli.info.Provider(), Node: host, Service: port, Fabric: cli.info.FabricName(), Domain: cli.info.DomainName()})
	require.NoError(t, err)
	defer dest.Free()
	cep := openClient(dest)
	require.NoError(t, cep.Connect(dest))
	clientEvent := make(chan fabric.Event, 1)
	go func() { clientEvent <- waitEventNoFail(cli, 5*time.Second) }()

	req := waitEvent(t, srv, 5*time.Second)
	require.Equal(t, fabric.EventConnReq, req.Kind)
	sep := openBound(t, srv, req.Info, 3)
	req.Info.Free()
	beforeAccept(sep)
	require.NoError(t, sep.Accept())
	require.Equal(t, fabric.EventConnected, waitEvent(t, srv, 5*time.Second).Kind)
	require.Equal(t, fabric.EventConnected, (<-clientEvent).Kind)
	return cep
}

// openBound opens an endpoint on s for info, bound to s's queues, enabled;
// it is closed at the end of the test.
func openBound(t testing.TB, s *stack, info *fabric.Info, ctx uint64) *fabric.Endpoint {
	t.Helper()
	ep, err := s.dom.OpenEndpoint(info, ctx)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ep.Close()) })
	require.NoError(t, ep.BindEQ(s.eq))
	require.NoError(t, ep.BindCQ(s.cq, fabric.BindTransmit|fabric.BindRecv))
	require.NoError(t, ep.Enable())
	return ep
}

// postSend sends msg on ep from registered memory of s, with context ctx;
// the registration ends with the test.
func postSend(t *testing.T, s *stack, ep *fabric.Endpoint, msg string, ctx uint64) {
	t.Helper()
	buf := mmap(t, 4096)
	copy(buf, msg)
	mr, err := s.dom.RegisterMemory(addr(buf), len(buf), fabric.AccessSend, 2)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mr.Close()) })
	require.Zero(t, ep.Send(addr(buf), len(msg), mr.Desc(), ctx))
}

// preset and presetCPP are what the environment named before the package
// applied its defaults (package variables are set before any test runs).
var (
	preset, presetSet       = os.LookupEnv(fabric.TCPStagingEnv)
	presetCPP, presetCPPSet = os.LookupEnv(fabric.RxMCompPerProgressEnv)
)

// TestProviderDefaults: the package's defaults reach the C environment
// libfabric reads (os.Setenv calls C's setenv in a cgo program), and a
// value the environment named before is kept.
func TestProviderDefaults(t *testing.T) {
	for _, c := range []struct {
		name, def, preset string
		presetSet         bool
		get               func() string
	}{
		{fabric.TCPStagingEnv, "0", preset, presetSet, fabric.TCPStaging},
		{fabric.RxMCompPerProgressEnv, "64", presetCPP, presetCPPSet, fabric.RxMCompPerProgress},
	} {
		got := c.get()
		want, set := os.LookupEnv(c.name)
		require.True(t, set, "%s: the Go environment names it once the default is applied", c.name)
		assert.Equal(t, want, got, "%s: C's environ agrees with Go's", c.name)
		if !c.presetSet {
			assert.Equal(t, c.def, got, "%s: the package's default unless the environment named one", c.name)
		} else {
			assert.Equal(t, c.preset, got, "%s: a value the environment named is kept", c.name)
		}
	}
}

// TestCQCloseRefusedWhileBound: a queue's Close while an endpoint bound to
// it is open fails with EBUSY and changes nothing, and the queue closes once
// the endpoint has. libfabric 1.17's tcp frees the queue's transfer pool
// before it refuses, so asking it would leave the endpoint on freed memory
// and the later close would free it again (glibc aborts the test binary
// within a few dozen runs when Close asks the provider).
func TestCQCloseRefusedWhileBound(t *testing.T) {
	for _, prov := range []string{"tcp", "sockets"} {
		t.Run(prov, func(t *testing.T) {
			for range 20 {
				s := openStack(t, prov)
				q, err := s.dom.OpenCQ(16, false)
				require.NoError(t, err)
				ep := openEP(t, s)
				require.NoError(t, ep.BindCQ(q, fabric.BindTransmit))
				require.NoError(t, ep.BindCQ(q, fabric.BindRecv), "the same queue bound twice counts once")
				assert.ErrorIs(t, q.Close(), fabric.EBUSY, "an endpoint is bound")
				_, _, errno := q.Read()
				assert.Zero(t, errno, "the refused close left the queue open")
				require.NoError(t, ep.Close())
				assert.NoError(t, q.Close(), "the endpoint has closed")
				assert.NoError(t, q.Close(), "idempotent")
			}
		})
	}
}
