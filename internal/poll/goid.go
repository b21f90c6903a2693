package poll

import (
	"runtime"

	"github.com/petermattis/goid"
)

// goroutineID returns the calling goroutine's ID. Go has no API for it;
// github.com/petermattis/goid reads it from the runtime's goroutine
// structure in a few nanoseconds, for every Go release and architecture
// its CI covers, where parsing the header of runtime.Stack costs about a
// microsecond. A layout goid does not know would give wrong IDs, and a
// wrong ID could let another goroutine post as the poller would, so goid
// is used only when it agrees with the stack's header on two goroutines
// (fastIDs, checked once); otherwise the stack is read.
//
// (Locking the poller to an OS thread and comparing thread IDs would also
// do, but makes every runtime.Gosched a thread hand-off, which costs
// latency on every empty poll.)
func goroutineID() uint64 {
	if fastIDs {
		return uint64(goid.Get())
	}
	return stackGoroutineID()
}

// fastIDs reports whether goid.Get gives the IDs of the stack's header.
var fastIDs = goidAgrees()

// FastGoroutineID reports whether OnPollerGoroutine reads the goroutine ID
// the fast way (a few nanoseconds). When it does not (a goroutine layout
// github.com/petermattis/goid does not know, or an architecture it reads
// through runtime.Stack), every OnPollerGoroutine parses a stack header,
// about a microsecond: a per-send path should then not ask it.
func FastGoroutineID() bool { return fastIDs }

// goidAgrees compares goid.Get with stackGoroutineID here and on another
// goroutine, whose IDs must differ.
func goidAgrees() bool {
	other := make(chan [2]uint64)
	go func() { other <- [2]uint64{uint64(goid.Get()), stackGoroutineID()} }()
	o := <-other
	fast, slow := uint64(goid.Get()), stackGoroutineID()
	return fast == slow && o[0] == o[1] && fast != o[0]
}

// stackGoroutineID reads the calling goroutine's ID from the header of its
// stack trace ("goroutine 123 [running]:").
func stackGoroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
