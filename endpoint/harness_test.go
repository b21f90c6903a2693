package endpoint_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

var providers = []string{"tcp", "sockets"}

// openDomain opens a domain on loopback and, at cleanup, checks that every
// registration was given back before closing it.
func openDomain(t *testing.T, prov string) *domain.Manager {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Zero(t, mgr.Stats().Registrations, "registrations alive after every endpoint closed")
		assert.NoError(t, mgr.Close())
	})
	return mgr
}

// receiver collects what a listener delivers.
type receiver struct {
	mu       sync.Mutex
	messages [][]byte
	closed   chan error
	est      atomic.Int32
	count    atomic.Int64
	onData   func(ep *endpoint.ReceiveEndpoint, data []byte)
}

func newReceiver() *receiver { return &receiver{closed: make(chan error, 16)} }

func (r *receiver) config(p netio.ReceiveParams) endpoint.ListenConfig {
	return endpoint.ListenConfig{
		Params: p,
		OnData: func(ep *endpoint.ReceiveEndpoint, data []byte) {
			if r.onData != nil {
				r.onData(ep, data)
			} else {
				r.mu.Lock()
				r.messages = append(r.messages, append([]byte(nil), data...))
				r.mu.Unlock()
			}
			r.count.Add(1)
		},
		OnConnectionEstablished: func(*endpoint.ReceiveEndpoint) { r.est.Add(1) },
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			select { // callbacks must not block: keep the first few
			case r.closed <- err:
			default:
			}
		},
	}
}

func listen(t *testing.T, mgr *domain.Manager, cfg endpoint.ListenConfig) *endpoint.Listener {
	t.Helper()
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// sender records completions by key.
type sender struct {
	mu       sync.Mutex
	statuses map[uint64][]netio.Status
	done     chan struct{} // one token per completion
	closed   chan error
}

func newSender(capacity int) *sender {
	return &sender{statuses: map[uint64][]netio.Status{}, done: make(chan struct{}, capacity), closed: make(chan error, 4)}
}

func (s *sender) config(p netio.BufferedSendParams) endpoint.SendConfig {
	return endpoint.SendConfig{
		Params: p,
		OnSendCompleted: func(key uint64, st netio.Status) {
			s.mu.Lock()
			s.statuses[key] = append(s.statuses[key], st)
			s.mu.Unlock()
			select {
			case s.done <- struct{}{}:
			default:
			}
		},
		OnConnectionClosed: func(err error) { s.closed <- err },
	}
}

func dial(t *testing.T, mgr *domain.Manager, addr string, cfg endpoint.SendConfig) *endpoint.SendEndpointBuffered {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// stallLimit is how long a count that a test waits on may stand still
// before the test fails. Far past a loaded machine's pauses (a poller
// without the CPU, or a socket taking nothing, for up to a second at load
// 10-20), so that only a stall fails; a wait that moves goes on until it
// is done, within the test binary's timeout.
const stallLimit = 30 * time.Second

// awaitProgress waits until done holds, and fails the test once count,
// which grows while the awaited work goes on, has stood still for
// stallLimit: a wait bounded by progress, not by a window that the whole
// work must fit in under any load (draining megabytes under -race on a
// busy machine took longer than the 10 s and 30 s windows it had).
func awaitProgress(t *testing.T, what string, count func() int64, done func() bool) {
	t.Helper()
	last, since := count(), time.Now()
	for !done() {
		if n := count(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > stallLimit {
			t.Fatalf("%s: no progress for %v (count %d)", what, stallLimit, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, msg)
		}
		time.Sleep(time.Millisecond)
	}
}

func recvErr(t *testing.T, ch chan error, timeout time.Duration, what string) error {
	t.Helper()
	return recvValue(t, ch, timeout, what)
}

// recvValue waits for a value on ch, failing the test after timeout.
func recvValue[T any](t *testing.T, ch chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		var zero T
		t.Fatalf("no %s within %v", what, timeout)
		return zero
	}
}
