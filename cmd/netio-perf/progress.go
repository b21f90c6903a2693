package main

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// Values of --progress.
const (
	progressAuto = "auto" // on when stdout is a terminal and --json is off
	progressOn   = "on"
	progressOff  = "off"
)

// progressFlags are the server's and the client's --progress and
// --progress-interval.
type progressFlags struct {
	mode     string
	interval time.Duration
}

// register adds the flags to a command line.
func (p *progressFlags) register(fs *cmdLine) {
	fs.StringVar(&p.mode, "progress", progressAuto, "a progress line (messages, MB/s, and the client's sends in flight or the server's open connections) every --progress-interval on stdout: auto (when stdout is a terminal and --json is off), on or off")
	fs.DurationVar(&p.interval, "progress-interval", time.Second, "time between progress lines")
}

// check validates the flags: progress lines and --json's one JSON line
// exclude each other.
func (p progressFlags) check(asJSON bool) error {
	switch p.mode {
	case progressAuto, progressOff:
	case progressOn:
		if asJSON {
			return errors.New("--progress on and --json exclude each other: --json's last line is for scripts")
		}
	default:
		return fmt.Errorf("--progress %q: want auto, on or off", p.mode)
	}
	if p.interval <= 0 {
		return errors.New("--progress-interval must be positive")
	}
	return nil
}

// enabled reports whether progress lines go to out: with --progress on, or
// with auto when out is a terminal and --json is off.
func (p progressFlags) enabled(out io.Writer, asJSON bool) bool {
	switch {
	case p.mode == progressOn:
		return true
	case p.mode == progressOff || asJSON:
		return false
	}
	return isTerminal(out)
}

// isTerminal reports whether w is a file open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// progressCounts is what a progress line shows: totals so far, and one
// gauge, named by the line (messages in flight, or open connections).
type progressCounts struct {
	messages, bytes uint64
	gauge           int64
}

// progress prints a line every interval until stopped: the totals, the
// rates over the last interval, and the gauge.
type progress struct {
	w     io.Writer
	role  string // "server" or "client"
	gauge string // the gauge's name, e.g. "in flight"
	read  func() progressCounts
	start time.Time

	stop chan struct{}
	done sync.WaitGroup
}

// start prints progress lines to out while the run goes on, when the flags
// say so, and returns the function that stops them: after it returns no
// line is printed any more. read is called on another goroutine.
func (p progressFlags) start(out io.Writer, asJSON bool, role, gauge string, read func() progressCounts) (stop func()) {
	if !p.enabled(out, asJSON) {
		return func() {}
	}
	pr := &progress{w: out, role: role, gauge: gauge, read: read, start: time.Now(), stop: make(chan struct{})}
	pr.done.Add(1)
	go pr.run(p.interval)
	var once sync.Once
	return func() {
		once.Do(func() { close(pr.stop) })
		pr.done.Wait()
	}
}

// run prints a line at every tick until stop is closed.
func (pr *progress) run(interval time.Duration) {
	defer pr.done.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	last, lastAt := pr.read(), pr.start
	for {
		select {
		case <-pr.stop:
			return
		case now := <-t.C:
			c := pr.read()
			fmt.Fprintln(pr.w, pr.line(c, last, now.Sub(lastAt), now.Sub(pr.start)))
			last, lastAt = c, now
		}
	}
}

// line renders one progress line: elapsed time, messages so far, and the
// rates since the previous line.
func (pr *progress) line(c, last progressCounts, interval, elapsed time.Duration) string {
	mbPerS, msgsPerS := rates(c.messages-last.messages, c.bytes-last.bytes, interval)
	return fmt.Sprintf("%s: %6.1f s  %d messages  %.1f MB/s  %.4f Mmsg/s  %s %d",
		pr.role, elapsed.Seconds(), c.messages, mbPerS, msgsPerS/1e6, pr.gauge, c.gauge)
}

// progressCounts returns what the server's progress line shows: messages
// and bytes received, and the connections open.
func (s *sink) progressCounts() progressCounts {
	return progressCounts{messages: s.messages.Load(), bytes: s.bytes.Load(), gauge: s.open.Load()}
}

// progressCounts returns what the client's progress line shows: messages
// and bytes sent and completed, and the sends in flight (posted, not yet
// completed).
func (s *sender) progressCounts() progressCounts {
	done := s.done() // before sent: sent only grows, so in flight is never negative
	return progressCounts{messages: s.completed.Load(), bytes: s.completed.Load() * uint64(s.size),
		gauge: int64(s.sent.Load() - done)}
}

// coalescedProgressCounts is progressCounts for a coalescing client: the
// messages SendMessage took and their bytes, and the coalesced buffers in
// flight.
func (s *sender) coalescedProgressCounts() progressCounts {
	done := s.done()
	st := s.ep.CoalesceStats()
	return progressCounts{messages: st.Messages, bytes: st.Bytes, gauge: int64(st.Buffers - done)}
}
