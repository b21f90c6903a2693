// Package leakcheck measures what a netio-go process holds, file
// descriptors, goroutines, memory registrations and mapped memory, so that
// storm and hostile-peer tests can show that all of it comes back once the
// connections are gone.
//
// Take a Snapshot after the long-lived objects (domain, listener) are open
// and one connection has come and gone, so that resources a provider opens
// lazily, once per process, are in it; run the load; then call AssertBack.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// Snapshot is what the process holds at one moment.
type Snapshot struct {
	FDs             int   // open file descriptors (/proc/self/fd)
	Goroutines      int   // runtime.NumGoroutine
	Registrations   int   // live registrations of the domain
	RegisteredBytes int64 // bytes in them
	MappedBytes     int64 // domain.MappedBytes: memory mapped by domain.Alloc
}

// Take measures the process now; registrations are those of mgr (none
// when mgr is nil).
func Take(mgr *domain.Manager) Snapshot {
	s := Snapshot{FDs: openFDs(), Goroutines: runtime.NumGoroutine(), MappedBytes: domain.MappedBytes()}
	if mgr != nil {
		st := mgr.Stats()
		s.Registrations, s.RegisteredBytes = st.Registrations, st.RegisteredBytes
	}
	return s
}

// openFDs counts the entries of /proc/self/fd, or returns -1 where there
// is none. Reading the directory opens one descriptor; it is counted in
// every snapshot alike.
func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

// String returns the snapshot's counts on one line, for a test's log.
func (s Snapshot) String() string {
	return fmt.Sprintf("fds=%d goroutines=%d registrations=%d registered_bytes=%d mapped_bytes=%d",
		s.FDs, s.Goroutines, s.Registrations, s.RegisteredBytes, s.MappedBytes)
}

// Settle polls until the process is back at want or timeout has passed, and
// returns the last snapshot. Teardown finishes asynchronously (a receive
// endpoint drains after its peer's shutdown, pollers stop on their own
// goroutines), so a leak is only a leak once it has had time to go.
func Settle(mgr *domain.Manager, want Snapshot, timeout time.Duration) Snapshot {
	deadline := time.Now().Add(timeout)
	for {
		got := Take(mgr)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Steady returns a snapshot once the process has held still for
// steadyFor (at most SettleTimeout): a baseline taken while a teardown is
// still finishing (a timer's goroutine, a poller on its way out) would
// make the comparison afterwards fail for the wrong reason.
func Steady(mgr *domain.Manager) Snapshot {
	const steadyFor = 200 * time.Millisecond
	deadline := time.Now().Add(SettleTimeout)
	snap, since := Take(mgr), time.Now()
	for time.Since(since) < steadyFor && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		if next := Take(mgr); next != snap {
			snap, since = next, time.Now()
		}
	}
	return snap
}

// SettleTimeout is how long AssertBack waits for teardown to finish: far
// beyond what it takes (well under a second) on a loaded 2-core machine.
const SettleTimeout = 15 * time.Second

// AssertBack waits for the process to come back to before, logs both
// snapshots with what, and asserts that every measure is back.
func AssertBack(t testing.TB, mgr *domain.Manager, before Snapshot, what string) Snapshot {
	t.Helper()
	start := time.Now()
	after := Settle(mgr, before, SettleTimeout)
	t.Logf("%s: before: %v", what, before)
	t.Logf("%s: after:  %v (settled in %v)", what, after, time.Since(start).Round(time.Millisecond))
	assert.Equal(t, before.FDs, after.FDs, "%s: open file descriptors", what)
	assert.Equal(t, before.Goroutines, after.Goroutines, "%s: goroutines", what)
	assert.Equal(t, before.Registrations, after.Registrations, "%s: registrations", what)
	assert.Equal(t, before.RegisteredBytes, after.RegisteredBytes, "%s: registered bytes", what)
	assert.Equal(t, before.MappedBytes, after.MappedBytes, "%s: mapped bytes", what)
	return after
}

// ReceiveRegion returns what one accepted connection of a listener with
// params p holds: one registration of its buffers, each rounded up to a
// cache line, in a mapping of whole pages.
func ReceiveRegion(p netio.ReceiveParams) Snapshot {
	p = p.WithDefaults()
	n := domain.AlignUp(p.BufferSize, domain.CacheLine) * p.BufferCount
	return Snapshot{Registrations: 1, RegisteredBytes: int64(n), MappedBytes: int64(domain.AlignUp(n, os.Getpagesize()))}
}

// AssertOnlyReceivers waits for the process to hold exactly what it held
// at before plus the receive regions of n connections that are still open
// (registrations, registered and mapped bytes; their descriptors belong
// to the provider, and are checked once those connections are closed),
// logs it with what, and asserts it.
func AssertOnlyReceivers(t testing.TB, mgr *domain.Manager, before Snapshot, n int, p netio.ReceiveParams, what string) {
	t.Helper()
	one := ReceiveRegion(p)
	want := before
	want.Registrations += n * one.Registrations
	want.RegisteredBytes += int64(n) * one.RegisteredBytes
	want.MappedBytes += int64(n) * one.MappedBytes
	deadline := time.Now().Add(SettleTimeout)
	got := Take(mgr)
	for !sameMemory(got, want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		got = Take(mgr)
	}
	t.Logf("%s: %d connections open hold: %v", what, n, got)
	assert.Equal(t, want.Registrations, got.Registrations, "%s: registrations beyond %d receive regions", what, n)
	assert.Equal(t, want.RegisteredBytes, got.RegisteredBytes, "%s: registered bytes beyond %d receive regions", what, n)
	assert.Equal(t, want.MappedBytes, got.MappedBytes, "%s: mapped bytes beyond %d receive regions", what, n)
}

func sameMemory(a, b Snapshot) bool {
	return a.Registrations == b.Registrations && a.RegisteredBytes == b.RegisteredBytes && a.MappedBytes == b.MappedBytes
}

// Max returns the larger of a and b in every measure.
func Max(a, b Snapshot) Snapshot {
	return Snapshot{
		FDs:             max(a.FDs, b.FDs),
		Goroutines:      max(a.Goroutines, b.Goroutines),
		Registrations:   max(a.Registrations, b.Registrations),
		RegisteredBytes: max(a.RegisteredBytes, b.RegisteredBytes),
		MappedBytes:     max(a.MappedBytes, b.MappedBytes),
	}
}
