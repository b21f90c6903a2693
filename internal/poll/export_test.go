package poll

import "time"

// WithClock returns c with the clock the poller measures its spin budget
// with replaced by now.
func WithClock(c Config, now func() time.Time) Config {
	c.now = now
	return c
}
