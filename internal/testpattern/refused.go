package testpattern

import "time"

// UntilRefused calls try until it has been refused without a break for
// quiet and settled (if not nil) holds, and reports true then; it reports
// false once deadline passes first. try reports whether its call was taken;
// after a refusal UntilRefused sleeps a millisecond. It is how the tests
// of a publisher that never blocks bring it to a refusal that stands: on a
// loaded machine a single refusal can be a moment's (late progress, the
// kernel growing a socket's buffers), so one that stood for quiet is taken
// as the state the test needs, and settled can ask more of it (a message
// known to wait).
func UntilRefused(deadline time.Time, quiet time.Duration, try func() (taken bool), settled func() bool) bool {
	var since time.Time // when the refusals began; zero while calls are taken
	for since.IsZero() || time.Since(since) < quiet || settled != nil && !settled() {
		if !time.Now().Before(deadline) {
			return false
		}
		if try() {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
	return true
}
