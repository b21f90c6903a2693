package endpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/fabric"
)

// noCounters has openCounter fail with errno until the test ends, as on a
// provider without counters (verbs' msg domain: fi_no_cntr_open).
func noCounters(t *testing.T, errno fabric.Errno) {
	t.Cleanup(func() { openCounter = (*fabric.Domain).OpenCounter })
	openCounter = func(*fabric.Domain) (*fabric.Counter, error) {
		return nil, &fabric.OpError{Op: "fi_cntr_open", Err: errno}
	}
}

// TestInjectWithoutCounters: on a provider without counters (ENOSYS or
// EOPNOTSUPP from fi_cntr_open) Dial with Inject still connects; the
// endpoint injects unconfirmed (fi_inject, its other sends completing as
// without Inject), every message arrives in order and is reported once,
// Close does not wait, and nothing is counted unconfirmed.
func TestInjectWithoutCounters(t *testing.T) {
	for _, errno := range []fabric.Errno{fabric.ENOSYS, fabric.EOPNOTSUPP} {
		t.Run(errno.Error(), func(t *testing.T) {
			noCounters(t, errno)
			r := newInjectRig(t)
			s := r.dial(t, 4, injectTestBuf)
			assert.False(t, s.c.injectCounted())
			require.Positive(t, s.InjectSize(), "Inject stays on")
			const sends = 100
			for k := range sends {
				size := 64
				if k%10 == 9 {
					size = injectTestBuf // past inject_size: a regular send, with its completion
				}
				require.Equal(t, netio.OK, r.send(s, uint64(k), size), "send %d", k)
			}
			r.allReceived(t, sends)
			r.settled(t, s, sends)
			// A small one goes the regular way too while the report queue
			// is full (a poller descheduled under load).
			assert.Positive(t, r.injects.Load(), "the small ones injected")
			assert.LessOrEqual(t, r.injects.Load(), int64(sends-sends/10), "only the small ones injected")
			require.NoError(t, s.Close())
			assert.Zero(t, s.Stats().InjectsUnconfirmed)
			assert.Equal(t, uint64(sends), s.Stats().Completed)
		})
	}
}

// TestInjectCounterErrorFailsDial: an error of fi_cntr_open other than a
// provider without counters fails the dial with that error.
func TestInjectCounterErrorFailsDial(t *testing.T) {
	noCounters(t, fabric.ENOMEM)
	r := newInjectRig(t)
	_, err := Dial(context.Background(), r.mgr, r.l.Addr(), SendConfig{
		Params:  netio.BufferedSendParams{BufferSize: 64, BufferCount: 4},
		Inject:  true,
		Runtime: cq.Runtime{Poller: r.p},
	})
	assert.ErrorIs(t, err, fabric.ENOMEM)
}
