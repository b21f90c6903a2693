// Package cputime reads how much CPU time this process has used, the figure
// behind every "CPU s/GB" and "cpu-ns/msg" the project reports: user plus
// system time of every thread (getrusage RUSAGE_SELF), so that a sender and
// a receiver in one process are both counted.
package cputime

import (
	"time"

	"golang.org/x/sys/unix"
)

// Process returns the user and system CPU time of every thread of this
// process so far, or 0 and the error when the kernel does not say.
func Process() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// Switches returns how many times the threads of this process, all of them,
// were taken off a CPU so far: voluntarily (they waited: a blocking call, a
// futex, a sleep) and involuntarily (preempted, their time slice over), or
// zeros and the error when the kernel does not say. Per message moved, the
// first counts wake-ups; the second, how much others wanted the CPU.
func Switches() (voluntary, involuntary int64, err error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, err
	}
	return ru.Nvcsw, ru.Nivcsw, nil
}
