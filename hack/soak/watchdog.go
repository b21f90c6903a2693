package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"
)

// exitStuck is the exit status of a run that did not end stuckAfter past
// its duration.
const exitStuck = 3

// watchdog ends a run that has not finished by the deadline: it writes
// every goroutine's stack and the trace's events to w (the trace also to
// the --trace file) and exits with exitStuck, so that a hang in a close
// or a drain is a report, not a CI job killed without a word. The
// returned function stops it.
func watchdog(after time.Duration, tr *trace, tracePath string, w io.Writer) (stop func()) {
	t := time.AfterFunc(after, func() {
		fmt.Fprintf(w, "soak: still running %v after the start: stuck; goroutines:\n", after)
		_ = pprof.Lookup("goroutine").WriteTo(w, 2)
		if tracePath != "" {
			if err := tr.dump(tracePath); err != nil {
				fmt.Fprintln(w, "soak:", err)
			}
		}
		tr.dumpTo(w)
		os.Exit(exitStuck)
	})
	return func() { t.Stop() }
}
