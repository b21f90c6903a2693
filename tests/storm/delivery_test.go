package storm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/tests/storm/traffic"
)

// assertAllDelivered waits up to waitTimeout for every stream of check to
// deliver perStream messages. When some are missing it says which (stream
// and message numbers), what the listener itself counted (a message the
// listener counted but the checker did not is the checker's), how many
// completions the pollers dropped for an owner already gone (a receiving
// connection ended before its last messages were read), and whether the
// missing ones come within a second waitTimeout: late, not lost.
func assertAllDelivered(t *testing.T, mgr *domain.Manager, l *traffic.Listener, check *traffic.Checker, perStream int) bool {
	t.Helper()
	all := func() bool { return check.AllDelivered(perStream) }
	if waitUntil(all, waitTimeout) {
		t.Logf("pollers dropped %d completions of ended owners", droppedCompletions(mgr))
		return true
	}
	rep := check.Report()
	dropped := droppedCompletions(mgr)
	recv := l.Stats().Received
	t.Logf("after %v: %d of %d messages checked; the listener received %d (%d receive errors); pollers dropped %d completions of ended owners",
		waitTimeout, rep.Total, len(rep.Delivered)*perStream, recv.Messages, recv.Errors, dropped)
	for _, m := range rep.Missing(perStream) {
		t.Log(m)
	}
	late := waitUntil(all, waitTimeout)
	after := check.Report().Total
	t.Logf("%v later: %d messages checked (%d arrived late)", waitTimeout, after, after-rep.Total)
	return assert.True(t, late, "every message delivered: %d missing after %v, %d after %v",
		len(rep.Delivered)*perStream-rep.Total, waitTimeout, len(rep.Delivered)*perStream-after, 2*waitTimeout)
}

// waitUntil polls cond every millisecond until it holds or timeout passes.
func waitUntil(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// droppedCompletions sums what the manager's pollers dropped because the
// owner was gone: canceled receives of ended connections, and any message
// a connection ended before reading.
func droppedCompletions(mgr *domain.Manager) uint64 {
	var n uint64
	for _, p := range mgr.Snapshot().PollerTotals {
		n += p.Dropped
	}
	return n
}
