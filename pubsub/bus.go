package pubsub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netio-go/netio"
)

// ErrNoPublisher reports a tag that no publisher on the bus serves.
var ErrNoPublisher = errors.New("pubsub: no publisher serves the tag")

// Bus maps tags to the publishers that serve them, so that subscribers
// subscribe by tag without knowing addresses. Publishers announce
// themselves on it. Implementations must be safe for concurrent use.
type Bus interface {
	// Lookup returns the subscription address ("ip:port") of the publisher
	// serving tag, or an error matching ErrNoPublisher when none does.
	Lookup(tag uint64) (string, error)
	// Announce says that the publisher named id serves tags at addr,
	// replacing what it said before.
	Announce(id, addr string, tags []uint64) error
	// Withdraw removes the publisher named id.
	Withdraw(id string) error
}

// refresher is a Bus whose announcements expire unless repeated: a
// publisher announces itself again every RefreshInterval.
type refresher interface {
	RefreshInterval() time.Duration
}

// busRefresh returns how often a publisher repeats its announcement on b.
func busRefresh(b Bus) time.Duration {
	if r, ok := b.(refresher); ok && r.RefreshInterval() > 0 {
		return r.RefreshInterval()
	}
	return time.Hour
}

// Fixed is a Bus on which every tag is served by one publisher, at the
// address it holds: what a subscriber uses to talk to a publisher it
// knows. Announce and Withdraw do nothing.
type Fixed string

// Lookup returns the address.
func (f Fixed) Lookup(uint64) (string, error) {
	if f == "" {
		return "", ErrNoPublisher
	}
	return string(f), nil
}

// Announce does nothing.
func (Fixed) Announce(string, string, []uint64) error { return nil }

// Withdraw does nothing.
func (Fixed) Withdraw(string) error { return nil }

// Defaults for DirectoryConfig.
const (
	DefaultHeartbeat  = time.Second
	DefaultStaleAfter = 10 * time.Second
	DefaultRescan     = 100 * time.Millisecond
)

// DirectoryConfig tunes a Directory.
type DirectoryConfig struct {
	// Heartbeat is how often a publisher refreshes its file. 0 selects
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// StaleAfter is the age (by the file's modification time) past which
	// an entry is ignored: the file of a publisher that died without
	// removing it. Hosts' clocks must agree to well within it. 0 selects
	// DefaultStaleAfter; it must exceed Heartbeat.
	StaleAfter time.Duration
	// Rescan is how long a lookup may use the previous reading of the
	// directory. 0 selects DefaultRescan.
	Rescan time.Duration
}

// DirectoryEntry is the content of one publisher's file (docs/wire.md,
// "The directory bus"). Started is when the Directory that wrote it was
// opened, the same for every publisher announcing through that Directory.
type DirectoryEntry struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Addr    string    `json:"addr"`
	Tags    []uint64  `json:"tags"`
	Host    string    `json:"host,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Started time.Time `json:"started"`
}

// Directory is the directory bus: one JSON file per publisher in a
// directory named after the bus's group, inside a directory every host
// sees (a shared file system). A publisher writes its file atomically
// (write, then rename), refreshes it every Heartbeat and removes it on
// Close; subscribers read the directory, at most every Rescan, and ignore
// files older than StaleAfter, so a publisher that died without removing
// its file stops being found. The directory is polled rather than watched
// with inotify (fsnotify): inotify does not see changes made by other
// hosts on NFS, the file system such a directory usually lives on.
type Directory struct {
	dir string
	cfg DirectoryConfig

	mu      sync.Mutex
	scanned time.Time
	index   map[uint64]DirectoryEntry
	entries []DirectoryEntry
	started time.Time
	written map[string][]byte // what this process last wrote, by id
}

// OpenDirectory opens the bus of group in dir, creating dir/group if
// needed. group must be a plain name (letters, digits, '.', '-', '_').
func OpenDirectory(dir, group string, cfg DirectoryConfig) (*Directory, error) {
	if err := checkName("group", group); err != nil {
		return nil, err
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Rescan == 0 {
		cfg.Rescan = DefaultRescan
	}
	if cfg.Heartbeat < 0 || cfg.Rescan < 0 || cfg.StaleAfter <= cfg.Heartbeat {
		return nil, fmt.Errorf("%w: pubsub: directory timings (Heartbeat %v, StaleAfter %v, Rescan %v)", netio.ErrInvalidArgument, cfg.Heartbeat, cfg.StaleAfter, cfg.Rescan)
	}
	d := &Directory{dir: filepath.Join(dir, group), cfg: cfg, written: map[string][]byte{}, started: time.Now()}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pubsub: directory bus: %w", err)
	}
	return d, nil
}

// checkName refuses names that are not plain file names.
func checkName(what, s string) error {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return fmt.Errorf("%w: pubsub: bad %s name %q", netio.ErrInvalidArgument, what, s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("%w: pubsub: bad %s name %q (letters, digits, '.', '-', '_' only)", netio.ErrInvalidArgument, what, s)
		}
	}
	if s[0] == '.' {
		return fmt.Errorf("%w: pubsub: %s name %q starts with '.'", netio.ErrInvalidArgument, what, s)
	}
	return nil
}

// Path returns the directory holding the group's files.
func (d *Directory) Path() string { return d.dir }

// RefreshInterval returns Heartbeat: a publisher on this bus announces
// itself again that often, which refreshes its file.
func (d *Directory) RefreshInterval() time.Duration { return d.cfg.Heartbeat }

// Announce writes (or refreshes) the file of publisher id.
func (d *Directory) Announce(id, addr string, tags []uint64) error {
	if err := checkName("publisher", id); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("%w: pubsub: %v", netio.ErrBadAddress, err)
	}
	host, _ := os.Hostname()
	e := DirectoryEntry{V: ProtocolVersion, ID: id, Addr: addr, Tags: slices.Sorted(slices.Values(tags)),
		Host: host, PID: os.Getpid(), Started: d.started.UTC()}
	if e.Tags == nil {
		e.Tags = []uint64{}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	name := filepath.Join(d.dir, id+".json")
	d.mu.Lock()
	defer d.mu.Unlock()
	if bytes.Equal(d.written[id], b) {
		now := time.Now()
		if err := os.Chtimes(name, now, now); err == nil {
			return nil
		}
		// gone (removed by hand?): write it again
	}
	tmp, err := os.CreateTemp(d.dir, "."+id+".tmp-*")
	if err != nil {
		return fmt.Errorf("pubsub: directory bus: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pubsub: directory bus: %w", err)
	}
	d.written[id] = b
	d.scanned = time.Time{} // our own change shows at once
	return nil
}

// Withdraw removes the file of publisher id; a file already gone is not
// an error.
func (d *Directory) Withdraw(id string) error {
	if err := checkName("publisher", id); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.written, id)
	d.scanned = time.Time{}
	if err := os.Remove(filepath.Join(d.dir, id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pubsub: directory bus: %w", err)
	}
	return nil
}

// Lookup returns the address of the publisher serving tag: among the
// fresh entries that list it, the one with the latest Started, and of
// those with the same Started the one with the greatest ID.
func (d *Directory) Lookup(tag uint64) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.scanLocked(); err != nil {
		return "", err
	}
	e, ok := d.index[tag]
	if !ok {
		return "", fmt.Errorf("%w: tag %#x in %s", ErrNoPublisher, tag, d.dir)
	}
	return e.Addr, nil
}

// Entries returns the fresh entries, ordered by ID.
func (d *Directory) Entries() ([]DirectoryEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.scanLocked(); err != nil {
		return nil, err
	}
	return slices.Clone(d.entries), nil
}

// scanLocked reads the directory again if the last reading is older than
// Rescan. Files that do not parse, and files older than StaleAfter, are
// skipped. d.mu is held.
func (d *Directory) scanLocked() error {
	now := time.Now()
	if !d.scanned.IsZero() && now.Sub(d.scanned) < d.cfg.Rescan {
		return nil
	}
	des, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("pubsub: directory bus: %w", err)
	}
	index := map[uint64]DirectoryEntry{}
	var entries []DirectoryEntry
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil || now.Sub(info.ModTime()) > d.cfg.StaleAfter || info.Size() > 64<<20 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, name))
		if err != nil {
			continue
		}
		e, err := ParseDirectoryEntry(strings.TrimSuffix(name, ".json"), b)
		if err != nil {
			continue
		}
		entries = append(entries, e)
		for _, t := range e.Tags {
			if old, ok := index[t]; !ok || e.Started.After(old.Started) || e.Started.Equal(old.Started) && e.ID > old.ID {
				index[t] = e
			}
		}
	}
	slices.SortFunc(entries, func(a, b DirectoryEntry) int { return strings.Compare(a.ID, b.ID) })
	d.index, d.entries, d.scanned = index, entries, now
	return nil
}

// ParseDirectoryEntry parses the content b of a directory bus file named
// id + ".json" (docs/wire.md, "The directory bus"): a JSON object of
// version 1 whose id is the file's and whose addr is "host:port". Every
// error matches ErrMalformed. Such files come from other hosts: the parser
// is fuzzed.
func ParseDirectoryEntry(id string, b []byte) (DirectoryEntry, error) {
	var e DirectoryEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return DirectoryEntry{}, fmt.Errorf("%w: directory entry %q: %v", ErrMalformed, id, err)
	}
	switch {
	case e.V != ProtocolVersion:
		return DirectoryEntry{}, fmt.Errorf("%w: directory entry %q: version %d", ErrMalformed, id, e.V)
	case e.ID != id:
		return DirectoryEntry{}, fmt.Errorf("%w: directory entry %q names itself %q", ErrMalformed, id, e.ID)
	}
	if _, _, err := net.SplitHostPort(e.Addr); err != nil {
		return DirectoryEntry{}, fmt.Errorf("%w: directory entry %q: addr: %v", ErrMalformed, id, err)
	}
	return e, nil
}

// defaultBusID names a publisher on a bus: host, process and port.
func defaultBusID(addr string) string {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, c := range host {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		b.WriteString("host")
	}
	_, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("%s-%d-%s", b.String(), os.Getpid(), port)
}
