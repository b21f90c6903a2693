package domain

import (
	"reflect"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio/stats"
)

// Registry returns the list of what is open on the manager: every poller,
// endpoint, listener, pool, cache and pub/sub part adds itself when it
// opens and leaves when it closes (see package stats). Parts of an
// application may add themselves too.
func (m *Manager) Registry() *stats.Registry {
	if m == nil {
		return nil
	}
	return &m.reg
}

// Snapshot returns everything opened on the manager, with counters: the
// registration accounting, then what the Registry holds. It reads the
// counters the parts keep (atomics) and never takes a lock their data
// path takes; closed endpoints' counters are in the per-kind totals. It
// allocates: take it for a scrape or a report, not per message. It works
// after Close too (the totals stay); a nil Manager gives a zero Snapshot.
func (m *Manager) Snapshot() stats.Snapshot {
	if m == nil {
		return stats.Snapshot{}
	}
	st := m.Stats()
	s := stats.Snapshot{Provider: m.prov, Address: m.addr, Taken: time.Now(),
		Registrations: stats.Registrations{Count: st.Registrations, Bytes: st.RegisteredBytes,
			PeakCount: st.PeakRegistrations, PeakBytes: st.PeakBytes, MaxCount: st.MaxRegistrations,
			MaxBytes: st.MaxRegisteredBytes, Refused: st.Refused}}
	m.reg.Read(&s)
	return s
}

// Logger returns l, or the manager's logger (Config.Logger) when l is the
// zero value: how every part opened on the manager picks its logger, so
// one logger given to the manager reaches all of them unless a part is
// given its own. zerolog.Nop() is not the zero value: it silences a part
// explicitly.
func (m *Manager) Logger(l zerolog.Logger) zerolog.Logger {
	if m == nil || !reflect.ValueOf(l).IsZero() {
		return l
	}
	return m.log
}
