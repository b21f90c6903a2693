package pubsub_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/pubsub"
)

var providers = []string{"tcp", "sockets"}

// openDomain opens a domain on loopback and, at cleanup, checks that every
// registration was given back before closing it.
func openDomain(t *testing.T, prov string) *domain.Manager {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Zero(t, mgr.Stats().Registrations, "registrations alive after everything closed")
		assert.NoError(t, mgr.Close())
	})
	return mgr
}

// newPublisher starts a publisher on a free port, closed at cleanup.
func newPublisher(t *testing.T, mgr *domain.Manager, cfg pubsub.PublisherConfig) *pubsub.Publisher {
	t.Helper()
	p, err := pubsub.NewPublisher(mgr, "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, p.Close()) })
	return p
}

// collector records what a subscriber receives: per tag, the sequence
// numbers in arrival order, and every gap. Its callbacks never block.
type collector struct {
	mu       sync.Mutex
	seqs     map[uint64][]uint64
	gaps     []pubsub.Gap
	bad      []string
	lost     atomic.Int64
	restored atomic.Int64
	count    atomic.Int64
	// stall, when set, is called from OnMessage (to simulate a slow
	// consumer: the only place a test blocks a callback on purpose).
	stall func()
}

func newCollector() *collector { return &collector{seqs: map[uint64][]uint64{}} }

// payload makes message seq of tag: its number and tag, then filler.
func payload(buf []byte, tag, seq uint64) []byte {
	binary.LittleEndian.PutUint64(buf, seq)
	binary.LittleEndian.PutUint64(buf[8:], tag)
	for i := 16; i < len(buf); i++ {
		buf[i] = byte(seq + uint64(i))
	}
	return buf
}

func (c *collector) onMessage(m pubsub.Message) {
	if c.stall != nil {
		c.stall()
	}
	var problem string
	switch {
	case len(m.Data) < 16:
		problem = fmt.Sprintf("tag %d: message of %d bytes", m.Tag, len(m.Data))
	case binary.LittleEndian.Uint64(m.Data) != m.Seq || binary.LittleEndian.Uint64(m.Data[8:]) != m.Tag:
		problem = fmt.Sprintf("tag %d seq %d: payload says seq %d tag %d", m.Tag, m.Seq,
			binary.LittleEndian.Uint64(m.Data), binary.LittleEndian.Uint64(m.Data[8:]))
	default:
		for i := 16; i < len(m.Data); i++ {
			if m.Data[i] != byte(m.Seq+uint64(i)) {
				problem = fmt.Sprintf("tag %d seq %d: byte %d differs", m.Tag, m.Seq, i)
				break
			}
		}
	}
	c.mu.Lock()
	c.seqs[m.Tag] = append(c.seqs[m.Tag], m.Seq)
	if problem != "" && len(c.bad) < 10 {
		c.bad = append(c.bad, problem)
	}
	c.mu.Unlock()
	c.count.Add(1)
}

func (c *collector) onGap(g pubsub.Gap) {
	c.mu.Lock()
	c.gaps = append(c.gaps, g)
	c.mu.Unlock()
}

func (c *collector) config(addr string) pubsub.SubscriberConfig {
	return pubsub.SubscriberConfig{
		Bus:            pubsub.Fixed(addr),
		OnMessage:      c.onMessage,
		OnGap:          c.onGap,
		OnLost:         func(string, []uint64, error) { c.lost.Add(1) },
		OnRestored:     func(string, []uint64) { c.restored.Add(1) },
		InitialBackoff: 5 * time.Millisecond,
		MaxBackoff:     100 * time.Millisecond,
	}
}

// received returns a copy of the sequence numbers received for tag.
func (c *collector) received(tag uint64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.seqs[tag]...)
}

func (c *collector) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

func (c *collector) gapList() []pubsub.Gap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]pubsub.Gap(nil), c.gaps...)
}

// newSubscriber starts a subscriber, closed at cleanup.
func newSubscriber(t *testing.T, mgr *domain.Manager, cfg pubsub.SubscriberConfig) *pubsub.Subscriber {
	t.Helper()
	s, err := pubsub.NewSubscriber(mgr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// ctxT returns a context bounded by d, canceled at cleanup.
func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for "+format, append([]any{timeout}, args...)...)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// publishAll publishes message seq of tag, retrying NoResources (Block)
// with a short pause, and returns the status it ended with.
func publishAll(t *testing.T, p *pubsub.Publisher, tag uint64, buf []byte, seq uint64, deadline time.Time) pubsub.Status {
	payload(buf, tag, seq)
	for {
		st := p.Publish(tag, buf)
		if st != pubsub.NoResources {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("tag %d seq %d: NoResources until the deadline", tag, seq)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// fastBus opens the directory bus of group "daq" in dir, with timings
// short enough for tests: a file is stale after 400 ms.
func fastBus(t *testing.T, dir string) *pubsub.Directory {
	t.Helper()
	d, err := pubsub.OpenDirectory(dir, "daq", pubsub.DirectoryConfig{Heartbeat: 50 * time.Millisecond,
		StaleAfter: 400 * time.Millisecond, Rescan: 10 * time.Millisecond})
	require.NoError(t, err)
	return d
}
