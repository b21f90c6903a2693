// Package domain opens a libfabric fabric and domain for one provider and
// local address, and owns everything registered in it: memory allocated
// outside the Go heap, and the accounting of every memory registration
// (count, bytes, high-water marks and limits).
package domain

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/closing"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/stats"
)

// ErrRegistrationsAlive is returned by Close while registrations are alive:
// Close changed nothing.
var ErrRegistrationsAlive = errors.New("domain: registrations still alive at Close")

// EndpointType is the kind of endpoint a domain serves.
type EndpointType int

const (
	// EndpointMsg is connected endpoints (FI_EP_MSG), package endpoint.
	EndpointMsg EndpointType = iota
	// EndpointRDM is connectionless reliable-datagram endpoints
	// (FI_EP_RDM), package rdm.
	EndpointRDM
)

// String names the type as libfabric does.
func (t EndpointType) String() string {
	switch t {
	case EndpointMsg:
		return "FI_EP_MSG"
	case EndpointRDM:
		return "FI_EP_RDM"
	}
	return "EndpointType(" + strconv.Itoa(int(t)) + ")"
}

// Config selects the provider and the local address of a Manager.
type Config struct {
	// Provider is the libfabric provider name, e.g. "tcp", "sockets",
	// "tcp;ofi_rxm" or "shm". Required.
	Provider string
	// Address is the local host address the domain is opened on, e.g.
	// "127.0.0.1" or an address of a network namespace. Required for the IP
	// providers: without it a provider may pick another interface than
	// intended. A provider whose addresses are names (shm) takes any
	// string, or none.
	Address string
	// Endpoints is the kind of endpoint the domain serves: EndpointMsg
	// (the zero value) or EndpointRDM.
	Endpoints EndpointType
	// MaxRegistrations caps the number of live memory registrations. 0
	// selects the provider's mr_cnt when it reports one, otherwise no limit.
	MaxRegistrations int
	// MaxRegisteredBytes caps the bytes of live registrations. 0 means no
	// limit.
	MaxRegisteredBytes int64
	// Logger receives setup and teardown messages, and is the logger of
	// every poller, endpoint, listener, pool and cache opened on the
	// manager whose own config leaves its Logger the zero value (see
	// Manager.Logger). The zero value logs nothing.
	Logger zerolog.Logger
}

func (c Config) validate() error {
	if c.Provider == "" {
		return fmt.Errorf("%w: domain: no provider named", netio.ErrInvalidArgument)
	}
	if c.Endpoints != EndpointMsg && c.Endpoints != EndpointRDM {
		return fmt.Errorf("%w: domain: unknown endpoint type %d", netio.ErrInvalidArgument, int(c.Endpoints))
	}
	if !quirks.For(c.Provider).NamedAddresses && (c.Address == "" || net.ParseIP(c.Address) == nil) {
		return fmt.Errorf("%w: domain: local address %q is not an IP address", netio.ErrBadAddress, c.Address)
	}
	if c.MaxRegistrations < 0 || c.MaxRegisteredBytes < 0 {
		return fmt.Errorf("%w: domain: negative registration limit", netio.ErrInvalidArgument)
	}
	return nil
}

// Stats is a snapshot of a Manager's registration accounting.
type Stats struct {
	Registrations      int   // live registrations
	RegisteredBytes    int64 // bytes in live registrations
	PeakRegistrations  int   // high-water mark of Registrations
	PeakBytes          int64 // high-water mark of RegisteredBytes
	MaxRegistrations   int   // limit in force (0: none)
	MaxRegisteredBytes int64 // limit in force (0: none)
	Refused            int64 // registrations refused because of a limit
}

// Manager owns one fabric and domain. It is safe for concurrent use.
type Manager struct {
	info *fabric.Info
	fab  *fabric.Fabric
	dom  *fabric.Domain
	prov string // the provider's name, kept for after Close frees info
	addr string
	eps  EndpointType
	caps uint64 // the capabilities asked for and granted
	log  zerolog.Logger

	nextKey atomic.Uint64  // requested registration keys, unique per domain
	reg     stats.Registry // what is open on the domain, for Snapshot

	mu     sync.Mutex
	closed bool
	regs   map[*Registration]struct{}
	stats  Stats

	// testHook, set only by tests before the Manager is shared, runs
	// where a registration is being made or undone outside mu.
	testHook func()
}

// Open opens the fabric and domain of cfg.Provider on cfg.Address.
func Open(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Ask for RMA as well when the provider has it, so that endpoints can
	// expose memory and pull or push it; a provider that only does messages
	// still opens, without it.
	info, caps, err := getInfo(cfg)
	if err != nil {
		return nil, fmt.Errorf("domain: no %s provider with %v endpoints on %q: %w", cfg.Provider, cfg.Endpoints, cfg.Address, err)
	}
	fab, err := fabric.OpenFabric(info)
	if err != nil {
		info.Free()
		return nil, fmt.Errorf("domain: %w", err)
	}
	dom, err := fab.OpenDomain(info)
	if err != nil {
		_ = fab.Close()
		info.Free()
		return nil, fmt.Errorf("domain: %w", err)
	}
	m := &Manager{info: info, fab: fab, dom: dom, prov: info.Provider(), addr: cfg.Address, eps: cfg.Endpoints, caps: caps,
		log: cfg.Logger, regs: make(map[*Registration]struct{})}
	m.stats.MaxRegistrations = cfg.MaxRegistrations
	if m.stats.MaxRegistrations == 0 {
		m.stats.MaxRegistrations = info.MRCount()
	}
	m.stats.MaxRegisteredBytes = cfg.MaxRegisteredBytes
	m.log.Debug().Str("provider", info.Provider()).Str("fabric", info.FabricName()).
		Str("domain", info.DomainName()).Bool("rma", m.SupportsRMA()).Uint64("mr_mode", info.MRMode()).Int("max_registrations", m.stats.MaxRegistrations).Msg("domain opened")
	return m, nil
}

// getInfo asks for RMA as well when the provider has it, so that endpoints
// can expose memory and pull or push it; a provider that only does
// messages still opens, without it. A connectionless domain also asks for
// FI_SOURCE, so that receives name their sender.
func getInfo(cfg Config) (*fabric.Info, uint64, error) {
	h := fabric.Hints{Provider: cfg.Provider, Node: cfg.Address, Service: "0", Source: true, EPType: fabric.EPMsg}
	base := fabric.CapMsg
	if cfg.Endpoints == EndpointRDM {
		h.EPType, base = fabric.EPRDM, fabric.CapMsg|fabric.CapSource
	}
	if quirks.For(cfg.Provider).NamedAddresses {
		// Names, not ports. Without a name the provider makes one per
		// endpoint (shm: from the process ID), and FI_SOURCE with no node
		// matches nothing.
		h.Service, h.Source = "", cfg.Address != ""
	}
	var err error
	for _, caps := range []uint64{base | fabric.CapRMA, base} {
		h.Caps = caps
		var info *fabric.Info
		if info, err = fabric.GetInfo(h); err == nil {
			return info, caps, nil
		}
	}
	return nil, 0, err
}

// Provider returns the provider's name, also after Close.
func (m *Manager) Provider() string { return m.prov }

// Endpoints returns the kind of endpoint the domain serves.
func (m *Manager) Endpoints() EndpointType { return m.eps }

// Address returns the local address the domain was opened on (host only).
func (m *Manager) Address() string { return m.addr }

// Caps returns the capabilities the domain was opened with (fabric.CapMsg,
// plus fabric.CapRMA when the provider supports it). Listeners and RMA
// endpoints ask for the same; message senders ask for fabric.CapMsg only,
// because on sockets a listener refuses a connection that asks for
// capabilities it did not ask for itself (a plain C FI_MSG server would).
func (m *Manager) Caps() uint64 { return m.caps }

// SupportsRMA reports whether memory can be exposed for remote access and
// read or written with RMA in this domain.
func (m *Manager) SupportsRMA() bool { return m.caps&fabric.CapRMA == fabric.CapRMA }

// Info returns the provider description the domain was opened with. It is
// owned by the Manager and valid until Close; after Close its accessors
// return zero values.
func (m *Manager) Info() *fabric.Info { return m.info }

// Fabric returns the open fabric, for the endpoint and cq packages.
func (m *Manager) Fabric() *fabric.Fabric { return m.fab }

// Domain returns the open domain, for the endpoint and cq packages.
func (m *Manager) Domain() *fabric.Domain { return m.dom }

// Stats returns a snapshot of the registration accounting.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Closed reports whether Close has marked the Manager closed: from then on
// it refuses registrations with netio.ErrClosed, so nothing can be opened
// in it. It lets a caller that would open things later (a reconnecting
// sender) refuse up front. A Close that fails never sets it.
func (m *Manager) Closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// RegistrationInfo describes one live registration of a Manager.
type RegistrationInfo struct {
	Addr   uintptr // first registered byte
	Len    int     // registered bytes
	Access Access  // what the registration allows
}

// Registrations returns the live registrations, ordered by address: which
// memory the provider, and through it a peer, may touch, and how. It is
// for diagnostics and tests (least access, leaks); it allocates and takes
// the Manager's lock.
func (m *Manager) Registrations() []RegistrationInfo {
	m.mu.Lock()
	out := make([]RegistrationInfo, 0, len(m.regs))
	for r := range m.regs {
		out = append(out, RegistrationInfo{Addr: r.addr, Len: r.length, Access: r.access})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b RegistrationInfo) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// Close closes the domain and the fabric, after the objects opened on them
// that are still closing (waiting at most CloseWait). While registrations
// are alive it changes nothing and returns an error wrapping
// ErrRegistrationsAlive that counts them: their memory may still be in use
// by open endpoints, so close those (and the buffers they hold) first, then
// Close again. A registration counts as alive from the moment Register
// (or AllocRegistered) accounts it, before fi_mr_reg, until
// Registration.Close (or Detach) has returned from fi_close on it, so
// registrations being made or undone on other goroutines make Close
// refuse too: when Close succeeds, no fi_mr_reg or fi_close of a
// registration of this Manager is running, and every later Register fails
// with netio.ErrClosed. It is idempotent once it has succeeded.
func (m *Manager) Close() error {
	// Before anything is marked: while it waits the manager stays open, so
	// a reconnecting sender that looks at Closed does not give up.
	if !closing.Wait(m, CloseWait) {
		m.log.Warn().Int("closing", closing.Pending(m)).Dur("waited", CloseWait).Msg("domain close: objects still closing")
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	// Not len(m.regs): Register inserts after fi_mr_reg, and Detach
	// removes before fi_close(mr). The count covers both spans (reserve
	// to unreserve), so fi_close(domain) never runs beside either.
	if n := m.stats.Registrations; n > 0 {
		bytes := m.stats.RegisteredBytes
		m.mu.Unlock()
		m.log.Warn().Int("registrations", n).Int64("bytes", bytes).Msg("domain close refused: registrations alive")
		return fmt.Errorf("%w: %d registrations, %d bytes: close the endpoints and buffers that hold them first",
			ErrRegistrationsAlive, n, bytes)
	}
	// The domain is closed under the lock, and only its success marks the
	// manager closed: a Close that fails (EBUSY: endpoints or queues still
	// open) is never seen as closed, not even while fi_close runs, so a
	// reconnecting sender dialling meanwhile neither reads Closed nor has a
	// registration refused with ErrClosed, and does not stop for good.
	if err := m.dom.Close(); err != nil {
		m.mu.Unlock()
		return fmt.Errorf("domain: %w (endpoints or queues still open?)", err)
	}
	m.closed = true // refuses new registrations from here on
	m.mu.Unlock()
	if err := m.fab.Close(); err != nil {
		return fmt.Errorf("domain: %w", err)
	}
	m.info.Free()
	return nil
}

// CloseWait bounds how long Close waits for objects opened on the domain
// whose close has begun and not finished: the poller of an endpoint closed
// from its own callback stops only once that callback returns. Objects
// never closed are not waited for: Close fails at once, as before.
const CloseWait = 5 * time.Second
