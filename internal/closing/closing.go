// Package closing counts, per owner, the objects whose close has begun and
// not finished: a poller closed from one of its own callbacks stops its
// goroutine and closes its queues only once that callback returns. The
// owner (a domain.Manager) waits for them, bounded, before it closes what
// they were opened on, instead of failing with "device or resource busy".
//
// Owners are keys of any comparable type, so that the packages that begin
// and end closes (cq) and the one that waits (domain) need not import each
// other beyond what they already do.
package closing

import (
	"sync"
	"time"
)

var (
	mu     sync.Mutex
	counts = map[any]int{}
)

// Begin records that an object of owner began to close.
func Begin(owner any) {
	mu.Lock()
	counts[owner]++
	mu.Unlock()
}

// End records that an object of owner finished closing.
func End(owner any) {
	mu.Lock()
	defer mu.Unlock()
	if counts[owner]--; counts[owner] <= 0 {
		delete(counts, owner)
	}
}

// Pending returns how many objects of owner are still closing.
func Pending(owner any) int {
	mu.Lock()
	defer mu.Unlock()
	return counts[owner]
}

// Wait waits until no object of owner is closing, or limit has passed, and
// reports whether none is. Closes finish in microseconds once their
// callback returns, so it polls, starting at 100 µs.
func Wait(owner any, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for pause := 100 * time.Microsecond; Pending(owner) > 0; pause = min(2*pause, 10*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}
