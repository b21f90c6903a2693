// Package zerocopy is the zero-copy send of every endpoint kind: a header
// copied into a slot of a headerbuf.HeaderBuffer, followed by the caller's
// data, not copied, as one libfabric message (fi_sendv). It owns the header
// slots (the kind's table of sends in flight), what each send holds while
// in flight (pins, cached registrations, iovecs, its destination), the
// caller's declared region and the registration cache. The connected
// endpoint (endpoint.SendEndpointZeroCopy) and the connectionless one
// (rdm.Endpoint.SendZeroCopy) differ only in where a send goes: Post for a
// connection, PostTo for an address.
package zerocopy

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/headerbuf"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
)

// Defaults for Settings.
const (
	DefaultHeaderSize  = 64
	DefaultHeaderCount = 128
	// MaxPieces bounds the iovecs of one send (header included), whatever
	// the provider's iov_limit.
	MaxPieces = 8
)

// Settings are the zero-copy fields of the public configs; their docs are
// there (endpoint.ZeroCopyConfig).
type Settings struct {
	HeaderSize          int
	HeaderCount         int
	Region              []byte
	SharedRegion        *domain.Registration
	Cache               *domain.RegistrationCache
	KeepGoRegistrations *bool
}

// WithDefaults fills zero fields and checks the settings against mgr. A
// bad setting is an error wrapping netio.ErrInvalidArgument; who names
// the package that refused.
func (s *Settings) WithDefaults(mgr *domain.Manager, who string) error {
	if s.HeaderSize == 0 {
		s.HeaderSize = DefaultHeaderSize
	}
	if s.HeaderCount == 0 {
		s.HeaderCount = DefaultHeaderCount
	}
	switch {
	case s.HeaderSize < 0 || s.HeaderCount < 0 || s.HeaderCount > netio.MaxBufferCount:
		return fmt.Errorf("%w: %s: %d header slots of %d bytes", netio.ErrInvalidArgument, who, s.HeaderCount, s.HeaderSize)
	case s.Region != nil && len(s.Region) == 0:
		return fmt.Errorf("%w: %s: empty zero-copy region", netio.ErrInvalidArgument, who)
	case s.Region != nil && s.SharedRegion != nil:
		return fmt.Errorf("%w: %s: both Region and SharedRegion", netio.ErrInvalidArgument, who)
	case s.SharedRegion != nil && s.SharedRegion.Domain() != mgr:
		return fmt.Errorf("%w: %s: SharedRegion is registered in another domain", netio.ErrInvalidArgument, who)
	case s.Cache != nil && s.Cache.Domain() != mgr:
		return fmt.Errorf("%w: %s: Cache registers in another domain", netio.ErrInvalidArgument, who)
	}
	if s.KeepGoRegistrations == nil {
		keep := quirks.For(mgr.Provider()).SoftwareRegistration
		s.KeepGoRegistrations = &keep
	}
	return nil
}

// slot is what one send in flight holds, indexed by its header slot.
type slot struct {
	pinners [MaxPieces]runtime.Pinner // one per piece: a Pinner holds 5 pins before it allocates
	regs    [MaxPieces]*domain.CachedRegistration
	iov     [MaxPieces]fabric.IOVec
	desc    [MaxPieces]uintptr
	n       int    // iovecs in use
	dest    uint64 // the caller's word for where it goes (Dest)
}

// Sends are the zero-copy sends of one endpoint. Open them with Open; the
// zero value has nothing to release.
type Sends struct {
	cfg      Settings
	headers  *headerbuf.HeaderBuffer
	inFlight *slots.Set // the header slots' states: the table of sends in flight
	slots    []slot
	cache    *domain.RegistrationCache
	ownCache bool
	keepGo   bool
	maxIOV   int

	region       *domain.Registration // Region's registration, or SharedRegion
	regionPinner runtime.Pinner       // pins a Go Region until Release
}

// ReadFree returns the header slots, the free ones and the fewest free
// since the previous ReadFree, without a lock a send takes (for snapshots,
// package stats); zeros before Open.
func (z *Sends) ReadFree() (total, free, minFree int) {
	if z.inFlight == nil {
		return 0, 0, 0
	}
	free, minFree = z.inFlight.ReadFree()
	return z.inFlight.Len(), free, minFree
}

// Open sets up the header slots, the region and the cache for cfg, which
// WithDefaults has checked. On error the caller calls Release.
func (z *Sends) Open(mgr *domain.Manager, cfg Settings) error {
	z.cfg, z.keepGo = cfg, *cfg.KeepGoRegistrations
	z.maxIOV = min(MaxPieces, max(mgr.Info().IOVLimit(), 1))
	var err error
	if z.headers, err = headerbuf.New(mgr, cfg.HeaderSize, cfg.HeaderCount); err != nil {
		return err
	}
	z.inFlight = slots.Of(z.headers)
	z.slots = make([]slot, cfg.HeaderCount)
	switch {
	case cfg.SharedRegion != nil:
		z.region = cfg.SharedRegion
	case cfg.Region != nil:
		z.regionPinner.Pin(&cfg.Region[0])
		if z.region, err = mgr.Register(uintptr(unsafe.Pointer(&cfg.Region[0])), len(cfg.Region), domain.AccessSend); err != nil {
			return err
		}
	}
	if z.cache = cfg.Cache; z.cache == nil {
		if z.cache, err = mgr.NewRegistrationCache(domain.CacheConfig{Access: domain.AccessSend}); err != nil {
			return err
		}
		z.ownCache = true
	}
	return nil
}

// Len returns the number of header slots: the most sends in flight.
func (z *Sends) Len() int { return len(z.slots) }

// Send sends header (copied into a slot) followed by data (not copied) as
// one message through c, while the caller holds c's post guard with ep.
// dest is the caller's word for where the send goes, which Dest returns to
// its post (0 for a connection). mark is or-ed into the slot index to make
// the core's key, so that a kind with several tables can tell them apart.
// The statuses are those of endpoint.SendEndpointZeroCopy.SendV.
func (z *Sends) Send(c *sendcore.Core, ep *fabric.Endpoint, header []byte, data [][]byte, key uint64,
	dest uint64, mark uint32) netio.Status {
	if len(data) > z.MaxPieces() {
		return netio.InvalidArgument
	}
	h := z.headers.GetHeader(header, key)
	if h.Status != netio.OK {
		return h.Status
	}
	s := &z.slots[h.Index]
	if st := z.stage(s, h, header, data); st != netio.OK {
		z.detach(s)
		z.headers.ReturnHeader(h.Index)
		return st
	}
	s.dest = dest
	total := 0
	for i := range s.n {
		total += int(s.iov[i].Len)
	}
	if st := c.Send(ep, h.Index|mark, s.n, total); st != netio.OK { // counts the send
		z.detach(s)
		z.headers.ReturnHeader(h.Index)
		return st
	}
	return netio.OK
}

// stage fills slot s's iovecs: the header from its slot, then the pieces.
func (z *Sends) stage(s *slot, h headerbuf.Result, header []byte, data [][]byte) netio.Status {
	s.n = 0
	if len(header) > 0 {
		s.iov[0], s.desc[0] = fabric.IOVec{Base: h.Addr, Len: uint64(len(header))}, z.headers.Desc()
		s.n = 1
	}
	for _, piece := range data {
		if len(piece) == 0 {
			continue
		}
		if st := z.attach(s, s.n, piece); st != netio.OK {
			return st
		}
		s.n++
	}
	if s.n == 0 { // an empty message still is one message
		s.iov[0], s.desc[0] = fabric.IOVec{Base: h.Addr}, z.headers.Desc()
		s.n = 1
	}
	return netio.OK
}

// Post posts the n iovecs of header slot idx on a connected endpoint.
func (z *Sends) Post(ep *fabric.Endpoint, idx uint32, n int, ctx uint64) fabric.Errno {
	s := &z.slots[idx]
	return ep.Sendv(s.iov[:n], s.desc[:n], ctx)
}

// PostTo posts the n iovecs of header slot idx to to, on a connectionless
// endpoint.
func (z *Sends) PostTo(ep *fabric.Endpoint, idx uint32, n int, to fabric.Addr, ctx uint64) fabric.Errno {
	s := &z.slots[idx]
	return ep.SendvTo(s.iov[:n], s.desc[:n], to, ctx)
}

// Dest returns the word Send was given for where the send in header slot
// idx goes.
func (z *Sends) Dest(idx uint32) uint64 { return z.slots[idx].dest }

// attach puts piece into iovec i of s: through the declared region's
// registration when it lies inside it, else pinned and registered through
// the cache.
func (z *Sends) attach(s *slot, i int, piece []byte) netio.Status {
	addr := uintptr(unsafe.Pointer(&piece[0]))
	s.iov[i] = fabric.IOVec{Base: addr, Len: uint64(len(piece))}
	if r := z.region; r != nil && addr >= r.Addr() && addr+uintptr(len(piece)) <= r.Addr()+uintptr(r.Len()) {
		s.desc[i] = r.Desc()
		return netio.OK
	}
	s.pinners[i].Pin(&piece[0]) // no-op for memory outside the Go heap
	reg, err := z.cache.Acquire(addr, len(piece))
	if err != nil {
		if errors.Is(err, netio.ErrNoResources) {
			return netio.NoResources
		}
		return netio.Failed
	}
	s.regs[i], s.desc[i] = reg, reg.Desc()
	return netio.OK
}

// detach lets go of what a slot holds and unpins its Go memory; the
// caller then frees the header slot. Registrations go back to the cache,
// or are invalidated when they must not outlive the pin.
func (z *Sends) detach(s *slot) {
	for i, reg := range s.regs {
		if reg == nil {
			continue
		}
		z.cache.Release(reg)
		if !z.keepGo {
			z.cache.Invalidate(s.iov[i].Base, int(s.iov[i].Len))
		}
		s.regs[i] = nil
	}
	for i := range s.pinners {
		s.pinners[i].Unpin()
	}
}

// Claim takes the send in header slot idx back, once: its key is the
// caller's, and what the slot held (pins, registrations) is let go before
// the slot is free for another send.
func (z *Sends) Claim(idx uint32) (uint64, bool) {
	if z.inFlight == nil || int(idx) >= len(z.slots) {
		return 0, false
	}
	key, ok := z.inFlight.Claim(idx, slots.SoleHolder)
	if !ok {
		return 0, false
	}
	z.detach(&z.slots[idx])
	z.inFlight.Release(idx, slots.SoleHolder)
	return key, true
}

// Pending appends the header slots of the sends in flight to dst, each
// or-ed with mark.
func (z *Sends) Pending(dst []uint32, mark uint32) []uint32 {
	if z.inFlight == nil {
		return dst
	}
	return z.inFlight.PostedMarked(dst, slots.SoleHolder, mark)
}

// MaxPieces returns the largest number of data pieces Send accepts: the
// provider's iov_limit less the header's, at most 7.
func (z *Sends) MaxPieces() int { return z.maxIOV - 1 }

// NumAvailableHeaders returns the fewest free header slots seen since the
// previous call.
func (z *Sends) NumAvailableHeaders() int { return z.headers.NumAvailable() }

// FreeHeaders returns the header slots free now (0 before Open): the
// sends that may be posted before one completes.
func (z *Sends) FreeHeaders() int {
	if z.inFlight == nil {
		return 0
	}
	return z.inFlight.Free()
}

// PendingSends returns the keys of the sends in flight. It allocates.
func (z *Sends) PendingSends() []uint64 { return z.headers.PendingSends() }

// Release frees the header slots, the own cache and region; the endpoint
// is closed and every slot detached. It is safe on zero Sends.
func (z *Sends) Release() error {
	var errs []error
	if z.headers != nil {
		errs = append(errs, z.headers.Close())
	}
	if z.ownCache && z.cache != nil {
		errs = append(errs, z.cache.Close())
	}
	if z.region != nil && z.region != z.cfg.SharedRegion {
		errs = append(errs, z.region.Close())
	}
	z.regionPinner.Unpin()
	return errors.Join(errs...)
}
