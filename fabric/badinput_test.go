package fabric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/fabric"
)

// closedObjects is one of each kind of object, opened and closed (or
// freed) again.
type closedObjects struct {
	info *fabric.Info
	fab  *fabric.Fabric
	dom  *fabric.Domain
	eq   *fabric.EQ
	cq   *fabric.CQ
	pep  *fabric.PassiveEndpoint
	ep   *fabric.Endpoint
	cntr *fabric.Counter
}

func openAndClose(t *testing.T, s *stack) closedObjects {
	t.Helper()
	var c closedObjects
	var err error
	c.info, err = fabric.GetInfo(fabric.Hints{Provider: s.info.Provider(), Node: "127.0.0.1", Service: "0", Source: true})
	require.NoError(t, err)
	c.fab, err = fabric.OpenFabric(c.info)
	require.NoError(t, err)
	c.dom, err = c.fab.OpenDomain(c.info)
	require.NoError(t, err)
	c.eq, err = c.fab.OpenEQ(8, true)
	require.NoError(t, err)
	c.cq, err = c.dom.OpenCQ(8, true)
	require.NoError(t, err)
	c.pep, err = c.fab.OpenPassiveEndpoint(c.info, 1)
	require.NoError(t, err)
	c.ep, err = c.dom.OpenEndpoint(c.info, 2)
	require.NoError(t, err)
	c.cntr, err = c.dom.OpenCounter()
	require.NoError(t, err)
	for _, o := range []interface{ Close() error }{c.ep, c.cntr, c.pep, c.cq, c.eq, c.dom, c.fab} {
		require.NoError(t, o.Close())
		require.NoError(t, o.Close(), "a second Close is a no-op")
	}
	c.info.Free()
	c.info.Free()
	return c
}

// TestBadInputObjectsNotOpen calls every setup call on, and with, nil and
// closed objects: each is refused with EBADF instead of passing NULL to
// libfabric, which would crash the process.
func TestBadInputObjectsNotOpen(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := openStack(t, prov)
			c := openAndClose(t, s)
			var nilInfo *fabric.Info
			var nilEQ *fabric.EQ
			var nilCQ *fabric.CQ
			var nilCntr *fabric.Counter
			calls := map[string]func() error{
				"OpenFabric(freed info)":          func() error { _, err := fabric.OpenFabric(c.info); return err },
				"OpenFabric(nil)":                 func() error { _, err := fabric.OpenFabric(nilInfo); return err },
				"closed fabric OpenDomain":        func() error { _, err := c.fab.OpenDomain(s.info); return err },
				"OpenDomain(freed info)":          func() error { _, err := s.fab.OpenDomain(c.info); return err },
				"closed fabric OpenEQ":            func() error { _, err := c.fab.OpenEQ(8, true); return err },
				"closed fabric OpenPassive":       func() error { _, err := c.fab.OpenPassiveEndpoint(s.info, 0); return err },
				"OpenPassiveEndpoint(nil info)":   func() error { _, err := s.fab.OpenPassiveEndpoint(nil, 0); return err },
				"closed domain OpenCQ":            func() error { _, err := c.dom.OpenCQ(8, true); return err },
				"nil domain OpenCQ":               func() error { _, err := (*fabric.Domain)(nil).OpenCQ(8, true); return err },
				"closed domain OpenEndpoint":      func() error { _, err := c.dom.OpenEndpoint(s.info, 0); return err },
				"OpenEndpoint(freed info)":        func() error { _, err := s.dom.OpenEndpoint(c.info, 0); return err },
				"closed domain RegisterMemory":    func() error { _, err := c.dom.RegisterMemory(addr(mmap(t, 64)), 64, fabric.AccessSend, 1); return err },
				"closed eq WaitFD":                func() error { _, err := c.eq.WaitFD(); return err },
				"closed eq Read":                  func() error { _, _, err := c.eq.Read(); return err },
				"closed cq WaitFD":                func() error { _, err := c.cq.WaitFD(); return err },
				"closed pep Bind":                 func() error { return c.pep.Bind(s.eq) },
				"closed pep Listen":               func() error { return c.pep.Listen() },
				"closed pep Reject":               func() error { return c.pep.Reject(s.info) },
				"closed pep Addr":                 func() error { _, err := c.pep.Addr(); return err },
				"closed ep BindEQ":                func() error { return c.ep.BindEQ(s.eq) },
				"closed ep BindCQ":                func() error { return c.ep.BindCQ(s.cq, fabric.BindRecv) },
				"closed ep Enable":                func() error { return c.ep.Enable() },
				"closed ep Connect":               func() error { return c.ep.Connect(s.info) },
				"closed ep Accept":                func() error { return c.ep.Accept() },
				"closed ep Shutdown":              func() error { return c.ep.Shutdown() },
				"closed ep Addr":                  func() error { _, err := c.ep.Addr(); return err },
				"nil ep Enable":                   func() error { return (*fabric.Endpoint)(nil).Enable() },
				"open pep Bind(nil eq)":           func() error { return openPEP(t, s).Bind(nilEQ) },
				"open pep Bind(closed eq)":        func() error { return openPEP(t, s).Bind(c.eq) },
				"open pep Reject(freed info)":     func() error { return openPEP(t, s).Reject(c.info) },
				"open ep BindCQ(nil cq)":          func() error { return openEP(t, s).BindCQ(nilCQ, fabric.BindRecv) },
				"open ep BindCQ(closed cq)":       func() error { return openEP(t, s).BindCQ(c.cq, fabric.BindRecv) },
				"open ep BindEQ(closed eq)":       func() error { return openEP(t, s).BindEQ(c.eq) },
				"open ep Connect(freed info)":     func() error { return openEP(t, s).Connect(c.info) },
				"open ep Connect(nil info)":       func() error { return openEP(t, s).Connect(nilInfo) },
				"nil pep Listen":                  func() error { return (*fabric.PassiveEndpoint)(nil).Listen() },
				"nil eq Read":                     func() error { _, _, err := nilEQ.Read(); return err },
				"nil cq WaitFD":                   func() error { _, err := nilCQ.WaitFD(); return err },
				"closed fabric OpenDomain(freed)": func() error { _, err := c.fab.OpenDomain(c.info); return err },
				"closed domain OpenCounter":       func() error { _, err := c.dom.OpenCounter(); return err },
				"nil domain OpenCounter":          func() error { _, err := (*fabric.Domain)(nil).OpenCounter(); return err },
				"closed ep BindCounter":           func() error { return c.ep.BindCounter(c.cntr) },
				"open ep BindCounter(nil)":        func() error { return openEP(t, s).BindCounter(nilCntr) },
				"open ep BindCounter(closed)":     func() error { return openEP(t, s).BindCounter(c.cntr) },
			}
			for name, call := range calls {
				var err error
				require.NotPanics(t, func() { err = call() }, name)
				assert.ErrorIs(t, err, fabric.EBADF, name)
				var op *fabric.OpError
				assert.ErrorAs(t, err, &op, "%s: errors name the refused call", name)
			}
		})
	}
}

func openPEP(t *testing.T, s *stack) *fabric.PassiveEndpoint {
	t.Helper()
	pep, err := s.fab.OpenPassiveEndpoint(s.info, 3)
	return closedAtCleanup(t, pep, err)
}

func openEP(t *testing.T, s *stack) *fabric.Endpoint {
	t.Helper()
	ep, err := s.dom.OpenEndpoint(s.info, 4)
	return closedAtCleanup(t, ep, err)
}

// closedAtCleanup requires that o was opened and closes it at cleanup.
func closedAtCleanup[T interface{ Close() error }](t *testing.T, o T, err error) T {
	t.Helper()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, o.Close()) })
	return o
}

// TestBadInputQueuesNotOpen: the data-path calls of a closed queue or
// endpoint report EBADF (or nothing) without reaching libfabric.
func TestBadInputQueuesNotOpen(t *testing.T) {
	s := openStack(t, "tcp")
	c := openAndClose(t, s)
	buf := mmap(t, 64)
	a := addr(buf)
	for name, errno := range map[string]fabric.Errno{
		"Send":           c.ep.Send(a, 64, 0, 1),
		"Sendv":          c.ep.Sendv([]fabric.IOVec{{Base: a, Len: 64}}, []uintptr{0}, 1),
		"Inject":         c.ep.Inject(buf),
		"InjectCounted":  c.ep.InjectCounted(buf, 0),
		"SendCompletion": c.ep.SendCompletion(a, 64, 0, 1),
		"Recv":           c.ep.Recv(a, 64, 0, 1),
		"RecvBatch": func() fabric.Errno {
			n, errno := c.ep.RecvBatch([]uintptr{a}, []uint64{64}, []uintptr{0}, []uint64{1})
			assert.Zero(t, n)
			return errno
		}(),
		"Read":  c.ep.Read(a, 64, 0, 0, 1, 1),
		"Write": c.ep.Write(a, 64, 0, 0, 1, 1),
		"CQ.Read": func() fabric.Errno {
			n, avail, errno := c.cq.Read()
			assert.Zero(t, n)
			assert.False(t, avail)
			return errno
		}(),
		"CQ.ReadSpin": func() fabric.Errno {
			n, avail, errno := c.cq.ReadSpin(time.Second)
			assert.Zero(t, n)
			assert.False(t, avail)
			return errno
		}(),
	} {
		assert.Equal(t, fabric.EBADF, errno, name)
	}
	_, ok := c.cq.ReadError()
	assert.False(t, ok, "a closed CQ has no error entry")
	assert.Zero(t, c.cntr.Read(), "a closed counter counts nothing")
	assert.Zero(t, c.cntr.ReadErr())
	assert.Zero(t, (*fabric.Counter)(nil).Read())
	assert.NoError(t, (*fabric.Counter)(nil).Close())
	assert.Equal(t, fabric.Completion{}, c.cq.Entry(0))
	assert.False(t, s.fab.TryWait(c.cq, nil), "a closed queue must be read, not waited on")
	assert.False(t, s.fab.TryWait(s.cq, c.eq))
	assert.False(t, s.fab.TryWait(nil, nil))
	assert.False(t, c.fab.TryWait(s.cq, s.eq))
}

// TestNoWaitObject: queues opened without a wait file descriptor have
// none to give (libfabric 1.17's tcp crashes when asked) and are never
// waited on.
func TestNoWaitObject(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := openStack(t, prov)
			cq, err := s.dom.OpenCQ(8, false)
			require.NoError(t, err)
			defer cq.Close()
			eq, err := s.fab.OpenEQ(8, false)
			require.NoError(t, err)
			defer eq.Close()
			_, err = cq.WaitFD()
			assert.ErrorIs(t, err, fabric.ENODATA)
			_, err = eq.WaitFD()
			assert.ErrorIs(t, err, fabric.ENODATA)
			assert.False(t, s.fab.TryWait(cq, nil))
			assert.False(t, s.fab.TryWait(s.cq, eq))
			assert.False(t, s.fab.TryWait(eq, s.cq))
			n, avail, errno := cq.Read()
			assert.Zero(t, n)
			assert.False(t, avail)
			assert.Zero(t, errno, "a queue without a wait object is read as any other")
			_, err = s.cq.WaitFD()
			assert.NoError(t, err, "a queue with a wait object still gives it")
		})
	}
}

// TestBadInputArguments: sizes and flags libfabric would accept and misuse
// are refused with EINVAL, and nothing is opened or registered.
func TestBadInputArguments(t *testing.T) {
	s := openStack(t, "tcp")
	buf := mmap(t, 4096)
	a := addr(buf)
	for name, call := range map[string]func() error{
		"OpenCQ(-1)": func() error { _, err := s.dom.OpenCQ(-1, true); return err },
		"OpenEQ(-1)": func() error { _, err := s.fab.OpenEQ(-1, true); return err },
		"RegisterMemory(nil address)": func() error {
			_, err := s.dom.RegisterMemory(0, 64, fabric.AccessSend, 1)
			return err
		},
		"RegisterMemory(0 bytes)":  func() error { _, err := s.dom.RegisterMemory(a, 0, fabric.AccessSend, 1); return err },
		"RegisterMemory(-1 bytes)": func() error { _, err := s.dom.RegisterMemory(a, -1, fabric.AccessSend, 1); return err },
		"RegisterMemory(wrapping)": func() error {
			_, err := s.dom.RegisterMemory(^uintptr(0)-10, 100, fabric.AccessSend, 1)
			return err
		},
		"RegisterMemory(no access)": func() error { _, err := s.dom.RegisterMemory(a, 64, 0, 1); return err },
		"RegisterMemory(unknown access)": func() error {
			_, err := s.dom.RegisterMemory(a, 64, fabric.AccessSend|1<<62, 1)
			return err
		},
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		assert.ErrorIs(t, err, fabric.EINVAL, name)
	}

	ep := openEP(t, s)
	for name, errno := range map[string]fabric.Errno{
		"Send(-1)":                ep.Send(a, -1, 0, 1),
		"Recv(-1)":                ep.Recv(a, -1, 0, 1),
		"Read(-1)":                ep.Read(a, -1, 0, 0, 1, 1),
		"Write(-1)":               ep.Write(a, -1, 0, 0, 1, 1),
		"Sendv(no iovec)":         ep.Sendv(nil, nil, 1),
		"Sendv(desc mismatch)":    ep.Sendv([]fabric.IOVec{{Base: a, Len: 1}}, nil, 1),
		"RecvBatch(len mismatch)": func() fabric.Errno { _, e := ep.RecvBatch([]uintptr{a}, nil, nil, nil); return e }(),
	} {
		assert.Equal(t, fabric.EINVAL, errno, name)
	}
	assert.Equal(t, fabric.Completion{}, s.cq.Entry(-1), "an index outside the batch gives the zero Completion")
	assert.Equal(t, fabric.Completion{}, s.cq.Entry(fabric.MaxBatch))
}

// TestBadInputInfoNotOpen: the accessors of a nil or freed Info return zero
// values instead of dereferencing NULL.
func TestBadInputInfoNotOpen(t *testing.T) {
	freed, err := fabric.GetInfo(fabric.Hints{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true})
	require.NoError(t, err)
	require.Equal(t, "tcp", freed.Provider())
	freed.Free()
	for _, i := range []*fabric.Info{nil, freed} {
		assert.NotPanics(t, func() {
			assert.Empty(t, i.Provider())
			assert.Empty(t, i.FabricName())
			assert.Empty(t, i.DomainName())
			assert.Zero(t, i.MRCount()+i.IOVLimit()+i.InjectSize()+i.TxSize()+i.RxSize())
			assert.Zero(t, i.MaxMsgSize())
			assert.False(t, i.MRModeLocal() || i.MRProvKey() || i.MRVirtAddr())
			assert.Zero(t, i.Caps())
			assert.Zero(t, i.MRMode())
			assert.False(t, i.HasCaps(fabric.CapMsg))
			i.Free()
		})
	}
}

// TestBadInputUnparsableNodes: addresses fi_getinfo cannot resolve are an
// error naming fi_getinfo, not a crash.
func TestBadInputUnparsableNodes(t *testing.T) {
	for _, h := range []fabric.Hints{
		{Provider: "tcp", Node: "nohostport", Service: "0", Source: true},
		{Provider: "tcp", Node: "[::1", Service: "0", Source: true},
		{Provider: "tcp", Node: "127.0.0.1", Service: "-1", Source: true},
		{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true, EPType: 99},
		{Provider: "tcp", Node: "127.0.0.1", Service: "0", Source: true, Caps: 1 << 62},
	} {
		info, err := fabric.GetInfo(h)
		var op *fabric.OpError
		if assert.ErrorAs(t, err, &op, "%+v", h) {
			assert.Equal(t, "fi_getinfo", op.Op)
		}
		assert.Nil(t, info)
	}
}
