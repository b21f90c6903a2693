package sendcore

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
)

// countingPost is a kind's post that records what the counters read while
// it runs, may report the send at once (as rdm's injects do), and refuses
// with refuse.
type countingPost struct {
	c         *Core
	refuse    fabric.Errno
	report    bool        // report the send completed during the post
	sentAt    []uint64    // Sent as the post saw it
	readings  []Snapshot  // every reading taken during the posts
	keys      []uint32    // the keys posted
	onPoller  func() bool // whether the post ran on the poller goroutine
	onPollers []bool
}

func (p *countingPost) post(_ *fabric.Endpoint, key uint32, _ int) fabric.Errno {
	p.keys = append(p.keys, key)
	p.sentAt = append(p.sentAt, p.c.Counters.Read().Sent)
	if p.onPoller != nil {
		p.onPollers = append(p.onPollers, p.onPoller())
	}
	if p.refuse != 0 {
		return p.refuse
	}
	if p.report {
		p.c.Counters.Finished(netio.OK, 1)
		p.readings = append(p.readings, p.c.Counters.Read())
	}
	return 0
}

// TestSendCountsBeforeThePostUnlessOnThePoller: Send counts a send once
// it is posted or queued, never one refused; before its post, so that
// Completed never passes Sent, except a PostOnPoller send posted at once
// on the poller goroutine, which nothing can report before Send returns:
// it is counted after its post, off a reply's way to the provider. A key
// the kind's post may report at once (Options.ReportedAtPost) is counted
// before its post there too.
func TestSendCountsBeforeThePostUnlessOnThePoller(t *testing.T) {
	t.Run("from any goroutine", func(t *testing.T) {
		var c Core
		p := &countingPost{c: &c}
		c.postSend = p.post
		require.Equal(t, netio.OK, c.Send(nil, 1, 8, 8))
		p.refuse = fabric.EAGAIN
		assert.Equal(t, netio.NoResources, c.Send(nil, 2, 16, 16), "refused for now")
		p.refuse = fabric.ECONNRESET
		assert.Equal(t, netio.Failed, c.Send(nil, 3, 32, 32), "refused")
		assert.Equal(t, []uint64{1, 2, 2}, p.sentAt, "each counted before its post")
		s := c.Counters.Read()
		assert.Equal(t, uint64(1), s.Sent, "the refused ones taken back")
		assert.Equal(t, uint64(8), s.Bytes)
	})

	t.Run("on the poller goroutine", func(t *testing.T) {
		c := coreOnPoller(t, Options{PostOnPoller: true, ReportedAtPost: 1 << 29})
		p := &countingPost{c: c, onPoller: c.Poller.OnPollerGoroutine}
		c.postSend = p.post
		var sts []netio.Status
		c.Poller.Do(func() {
			p.report = true
			sts = append(sts, c.Send(nil, 2|1<<29, 16, 16)) // reported during its post
			p.report = false
			sts = append(sts, c.Send(nil, 1, 8, 8))
			p.refuse = fabric.EAGAIN
			sts = append(sts, c.Send(nil, 3, 32, 32))
			p.refuse = 0
		})
		assert.Equal(t, []netio.Status{netio.OK, netio.OK, netio.NoResources}, sts)
		assert.Equal(t, []bool{true, true, true}, p.onPollers, "posted at once, on the poller goroutine")
		assert.Equal(t, []uint64{1, 1, 2}, p.sentAt,
			"the key reported at its post counted before it, the others after theirs")
		require.Len(t, p.readings, 1)
		assert.LessOrEqual(t, p.readings[0].Completed, p.readings[0].Sent, "Completed never passes Sent")
		s := c.Counters.Read()
		assert.Equal(t, uint64(2), s.Sent, "the refused one not counted")
		assert.Equal(t, uint64(24), s.Bytes)
	})

	t.Run("queued for the poller", func(t *testing.T) {
		c := coreOnPoller(t, Options{PostOnPoller: true})
		p := &countingPost{c: c}
		c.InitHandOff(1, p.post)
		t.Cleanup(func() { c.Poller.Do(c.hand.reset) })
		c.hand.scheduled = true // as if a drain were due: none is scheduled, the counts stay as Send left them
		require.Equal(t, netio.OK, c.Send(nil, 1, 8, 8), "queued: not on the poller goroutine")
		assert.Equal(t, uint64(1), c.Counters.Read().Sent, "counted as it is queued, before the drain posts it")
		assert.Equal(t, netio.NoResources, c.Send(nil, 2, 16, 16), "the ring holds one")
		s := c.Counters.Read()
		assert.Equal(t, uint64(1), s.Sent, "the refused one taken back")
		assert.Equal(t, uint64(8), s.Bytes)
		assert.Empty(t, p.keys, "nothing posted yet")
	})
}

// coreOnPoller returns a core with opts attached to a poller of a tcp
// domain of its own (no endpoint: the posts are the test's).
func coreOnPoller(t *testing.T, opts Options) *Core {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	p, err := cq.Open(mgr, cq.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	c := &Core{Poller: poll.Of(p), opts: opts}
	c.postDirect = opts.PostOnPoller && poll.FastGoroutineID()
	if !c.postDirect {
		t.Skip("no fast goroutine ID here: every PostOnPoller send is queued")
	}
	return c
}
