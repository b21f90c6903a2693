package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/rs/zerolog"
)

// logLevel is --log-level: the least severe zerolog level the library's
// logs show on stderr. Its default, disabled, logs nothing.
type logLevel zerolog.Level

// register adds --log-level to a mode's flags, set to disabled.
func (l *logLevel) register(fs *flag.FlagSet) {
	*l = logLevel(zerolog.Disabled)
	fs.Var(l, "log-level", "log the library's messages (connections, set-up, teardown; never one per message) to stderr from this level on: trace, debug, info, warn, error, fatal, panic or disabled")
}

func (l *logLevel) String() string { return zerolog.Level(*l).String() }

func (l *logLevel) Set(s string) error {
	lvl, err := zerolog.ParseLevel(s)
	if err != nil || s == "" {
		return fmt.Errorf("want trace, debug, info, warn, error, fatal, panic or disabled")
	}
	*l = logLevel(lvl)
	return nil
}

// logger returns the logger netio-perf gives the library, which hands it
// on to what the manager opens: zerolog's console format on w from
// --log-level on, or one that logs nothing (the default). Pollers log from
// their own goroutines, so the lines go through one lock (SyncWriter).
func (c commonFlags) logger(w io.Writer) zerolog.Logger {
	if zerolog.Level(c.logLevel) == zerolog.Disabled {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: zerolog.SyncWriter(w), NoColor: true}).Level(zerolog.Level(c.logLevel)).
		With().Timestamp().Logger()
}

// roleLogger is logger tagged with the mode's role, for publish and
// subscribe, whose --log (log connection and subscription events) without
// --log-level means debug: every event the library logs.
func (c commonFlags) roleLogger(w io.Writer, role string, logEvents bool) zerolog.Logger {
	if logEvents && zerolog.Level(c.logLevel) == zerolog.Disabled {
		c.logLevel = logLevel(zerolog.DebugLevel)
	}
	return c.logger(w).With().Str("role", role).Logger()
}
