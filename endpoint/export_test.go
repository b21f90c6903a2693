package endpoint

import "time"

// ReadingOut reports whether r's close is reading out the messages the
// provider placed before it (ReceiveEndpoint.readOut): OnData then runs
// for a message that came after the close was decided. Call it from
// OnData (the poller goroutine).
func ReadingOut(r *ReceiveEndpoint) bool { return r.readingOut }

// SendsHeld returns how many sends the provider holds unsent, as the
// send counter of an endpoint with SendConfig.Inject tells: for tests of
// SendConfig.MaxInjectsHeld.
func SendsHeld(s *SendEndpointBuffered) uint64 { return s.c.SendsHeld() }

// ReconnectingSendsHeld is SendsHeld of r's current connection; 0 while
// it has none.
func ReconnectingSendsHeld(r *ReconnectingSender) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ep == nil {
		return 0
	}
	return SendsHeld(r.ep)
}

// BacklogRetries counts the timer's retries of r's refused backlog.
func BacklogRetries(r *ReconnectingSender) uint64 { return r.retries.Load() }

// BacklogRetryMax is the cap of the wait between those retries.
const BacklogRetryMax = backlogRetryMax

// BacklogRetryWait is the wait r's next retry of a refused backlog is
// armed with, and how many retries the timer ran so far, read together.
func BacklogRetryWait(r *ReconnectingSender) (wait time.Duration, retries uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retryWait.Wait(), r.retries.Load()
}

// ShortenBacklogRetry brings r's retry wait back to its first, as a post
// taken does.
func ShortenBacklogRetry(r *ReconnectingSender) {
	r.mu.Lock()
	r.retryWait.Reset()
	r.mu.Unlock()
}

// BacklogRetry is the first wait before a retry of a refused backlog.
const BacklogRetry = backlogRetry

// PollerPass returns once s's poller goroutine has read its completion
// queue (driving the provider's progress) after the call, and delivered
// what it read: two functions run on it in turn, and the poller reads its
// queue between them. A test that waits for a sender to stall asks it
// whether a quiet spell was the sender's poller not running (a loaded
// machine) or sends the provider cannot complete.
func PollerPass(s *SendEndpointBuffered) {
	s.c.Poller.Do(func() {})
	s.c.Poller.Do(func() {})
}
