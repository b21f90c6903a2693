package sendcore

import (
	"sync"
	"sync/atomic"

	"github.com/netio-go/netio/internal/poll"
)

// Closer runs a Close once without holding a lock across it: the first
// caller runs it; a caller on the poller goroutine (a callback) returns at
// once instead of waiting for a Close that waits for that very callback;
// other callers wait for the first to finish and get its result.
type Closer struct {
	started atomic.Bool
	once    sync.Once
	done    chan struct{}
	err     error
}

// Close runs fn if no call has before, and returns its error; see Closer
// for who waits. p is the poller whose callbacks must not wait (may be nil).
func (c *Closer) Close(p *poll.Poller, fn func() error) error {
	c.once.Do(func() { c.done = make(chan struct{}) })
	if c.started.CompareAndSwap(false, true) {
		c.err = fn()
		close(c.done)
		return c.err
	}
	if p != nil && p.OnPollerGoroutine() {
		return nil
	}
	<-c.done
	return c.err
}
