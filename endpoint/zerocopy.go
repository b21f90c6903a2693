package endpoint

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/headerbuf"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/slots"
	"github.com/netio-go/netio/stats"
)

// Defaults for ZeroCopyConfig.
const (
	DefaultHeaderSize  = 64
	DefaultHeaderCount = 128
	// maxPieces bounds the iovecs of one send (header included), whatever
	// the provider's iov_limit.
	maxPieces = 8
)

// ZeroCopyConfig configures a zero-copy send endpoint.
//
// # Which memory is safe
//
// Data may lie in a declared region (Region, or SharedRegion registered
// once per domain), used with its registration, or anywhere in Go memory:
// each piece is pinned with runtime.Pinner from post to completion and
// registered through a RegistrationCache. On providers that register in
// software (tcp, sockets, udp, shm: no physical pages are pinned) a cached
// registration may outlive the pin, so the cache keeps it for reuse. On
// NICs that pin physical pages, Go heap memory that is unpinned and freed
// can be given other pages while a stale registration still points at the
// old ones: there the endpoint invalidates the range when the send
// completes (KeepGoRegistrations false), and only declared regions are
// cached across sends.
type ZeroCopyConfig struct {
	// HeaderSize is the size of a header slot: the largest header. 0
	// selects DefaultHeaderSize.
	HeaderSize int
	// HeaderCount is the number of header slots, and so the largest number
	// of sends in flight. 0 selects DefaultHeaderCount.
	HeaderCount int
	// Region is memory the caller declares up front (a DMA buffer, say),
	// registered once for this connection; sends whose data lies inside it
	// use that registration. Go memory given here stays pinned until Close.
	Region []byte
	// SharedRegion is memory registered once per domain by the caller and
	// shared by endpoints; the caller closes it after them. Its memory must
	// be outside the Go heap (domain.Alloc) or pinned by the caller for as
	// long as it is registered: the endpoint does not pin it.
	SharedRegion *domain.Registration
	// Cache registers data outside the regions. Nil gives the endpoint its
	// own, closed with it; share one between endpoints of a domain to reuse
	// registrations across them.
	Cache *domain.RegistrationCache
	// KeepGoRegistrations keeps registrations of Go memory cached after the
	// send completes. Nil selects true on software-registration providers
	// (tcp, sockets, udp, shm) and false elsewhere; see the type comment.
	KeepGoRegistrations *bool
	// OnSendCompleted is called once per send. Its key is the key the
	// caller gave Send or SendV; the status is OK, Failed, or Canceled when
	// the endpoint closed first. From then on the caller may reuse the
	// data. It runs on the poller
	// goroutine and must not block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnConnectionClosed is called once when the connection ends, as for
	// SendConfig. May be nil.
	OnConnectionClosed func(err error)
	// DeliveryComplete and ProgressTimeout are as for SendConfig.
	DeliveryComplete bool
	ProgressTimeout  time.Duration
	// Runtime names the poller to share and the logger.
	cq.Runtime
}

// zcSlot is what one send in flight holds, indexed by its header slot.
type zcSlot struct {
	pinners [maxPieces]runtime.Pinner // one per piece: a Pinner holds 5 pins before it allocates
	regs    [maxPieces]*domain.CachedRegistration
	iov     [maxPieces]fabric.IOVec
	desc    [maxPieces]uintptr
}

// SendEndpointZeroCopy sends a small header copied into a registered slot
// followed by the caller's data, not copied, as one libfabric message
// (fi_sendv). The completion reports the caller's key; until then the data
// must not change.
type SendEndpointZeroCopy struct {
	c        sendConn
	cfg      ZeroCopyConfig
	headers  *headerbuf.HeaderBuffer
	inFlight *slots.Set // the header slots' states: the table of sends in flight
	slots    []zcSlot
	cache    *domain.RegistrationCache
	ownCache bool
	keepGo   bool
	maxIOV   int

	region       *domain.Registration // Region's registration, or SharedRegion
	regionPinner runtime.Pinner       // pins a Go Region until Close
}

// DialZeroCopy connects to the listener at addr like Dial and returns a
// zero-copy send endpoint.
func DialZeroCopy(ctx context.Context, mgr *domain.Manager, addr string, cfg ZeroCopyConfig) (*SendEndpointZeroCopy, error) {
	if mgr == nil {
		return nil, fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	}
	if err := cfg.withDefaults(mgr); err != nil {
		return nil, err
	}
	host, port, err := splitAddr(addr, false)
	if err != nil {
		return nil, err
	}
	z := &SendEndpointZeroCopy{cfg: cfg, keepGo: *cfg.KeepGoRegistrations}
	z.maxIOV = min(maxPieces, max(mgr.Info().IOVLimit(), 1))
	z.c.addr = addr
	opts := connOptions{Options: sendcore.Options{Poller: cfg.Poller, PollerConfig: cfg.PollerConfig, Log: cfg.Logger,
		OnClosed: cfg.OnConnectionClosed, OnSendCompleted: cfg.OnSendCompleted},
		deliveryComplete: cfg.DeliveryComplete, progressTimeout: cfg.ProgressTimeout, statsKind: stats.KindZeroCopy}
	if err := z.c.dial(ctx, mgr, (*zeroCopyKind)(z), host, port, opts, z.prepare); err != nil {
		return nil, err
	}
	return z, nil
}

func (c *ZeroCopyConfig) withDefaults(mgr *domain.Manager) error {
	if err := checkProgressTimeout(c.ProgressTimeout); err != nil {
		return err
	}
	if c.HeaderSize == 0 {
		c.HeaderSize = DefaultHeaderSize
	}
	if c.HeaderCount == 0 {
		c.HeaderCount = DefaultHeaderCount
	}
	if c.HeaderSize < 0 || c.HeaderCount < 0 || c.HeaderCount > netio.MaxBufferCount {
		return fmt.Errorf("%w: endpoint: %d header slots of %d bytes", netio.ErrInvalidArgument, c.HeaderCount, c.HeaderSize)
	}
	if c.Region != nil && len(c.Region) == 0 {
		return fmt.Errorf("%w: endpoint: empty zero-copy region", netio.ErrInvalidArgument)
	}
	if c.Region != nil && c.SharedRegion != nil {
		return fmt.Errorf("%w: endpoint: both Region and SharedRegion", netio.ErrInvalidArgument)
	}
	if c.SharedRegion != nil && c.SharedRegion.Domain() != mgr {
		return fmt.Errorf("%w: endpoint: SharedRegion is registered in another domain", netio.ErrInvalidArgument)
	}
	if c.Cache != nil && c.Cache.Domain() != mgr {
		return fmt.Errorf("%w: endpoint: Cache registers in another domain", netio.ErrInvalidArgument)
	}
	if c.KeepGoRegistrations == nil {
		keep := quirks.For(mgr.Provider()).SoftwareRegistration
		c.KeepGoRegistrations = &keep
	}
	return nil
}

// prepare sets up the header slots, the region and the cache.
func (z *SendEndpointZeroCopy) prepare() error {
	mgr := z.c.Mgr
	var err error
	if z.headers, err = headerbuf.New(mgr, z.cfg.HeaderSize, z.cfg.HeaderCount); err != nil {
		return err
	}
	z.inFlight = slots.Of(z.headers)
	z.slots = make([]zcSlot, z.cfg.HeaderCount)
	z.c.InitHandOff(len(z.slots), z.postSend)
	switch {
	case z.cfg.SharedRegion != nil:
		z.region = z.cfg.SharedRegion
	case z.cfg.Region != nil:
		z.regionPinner.Pin(&z.cfg.Region[0])
		if z.region, err = mgr.Register(uintptr(unsafe.Pointer(&z.cfg.Region[0])), len(z.cfg.Region), domain.AccessSend); err != nil {
			return err
		}
	}
	if z.cache = z.cfg.Cache; z.cache == nil {
		if z.cache, err = mgr.NewRegistrationCache(domain.CacheConfig{Access: domain.AccessSend}); err != nil {
			return err
		}
		z.ownCache = true
	}
	return nil
}

// Send sends header (copied into a slot) followed by data (not copied) as
// one message. It returns OK when posted; NoResources when no header slot
// or queue entry is free or the registration limit is reached (retry after
// completions); InvalidArgument for a header larger than a slot
// (as for a message larger than a buffer); Closed after Close
// or connection loss. The data must not change until OnSendCompleted
// reports key.
//
// A message of HandOffSize bytes or more (header and data), and any message
// sent while one is still waiting, is posted by the poller goroutine, as
// SendEndpointBuffered.SendBuffer describes: OK then means queued, in
// order, and a post the provider refuses comes back through
// OnSendCompleted with Failed.
func (z *SendEndpointZeroCopy) Send(header, data []byte, key uint64) netio.Status {
	pieces := [1][]byte{data}
	return z.SendV(header, pieces[:], key)
}

// SendV is Send with the data in several pieces, gathered into one message
// after the header. Up to MaxPieces pieces; more is InvalidArgument.
func (z *SendEndpointZeroCopy) SendV(header []byte, data [][]byte, key uint64) netio.Status {
	if len(data) > z.MaxPieces() {
		return netio.InvalidArgument
	}
	ep, ok := z.c.Guard.Acquire()
	if !ok {
		return netio.Closed
	}
	defer z.c.Guard.Release()
	h := z.headers.GetHeader(header, key)
	if h.Status != netio.OK {
		return h.Status
	}
	slot := &z.slots[h.Index]
	n := 0
	if len(header) > 0 {
		slot.iov[0], slot.desc[0] = fabric.IOVec{Base: h.Addr, Len: uint64(len(header))}, z.headers.Desc()
		n = 1
	}
	for _, piece := range data {
		if len(piece) == 0 {
			continue
		}
		if st := z.attach(slot, n, piece); st != netio.OK {
			z.detach(slot)
			z.headers.ReturnHeader(h.Index)
			return st
		}
		n++
	}
	if n == 0 { // an empty message still is one message
		slot.iov[0], slot.desc[0] = fabric.IOVec{Base: h.Addr}, z.headers.Desc()
		n = 1
	}
	total := 0
	for i := range n {
		total += int(slot.iov[i].Len)
	}
	// Counted before the post: once posted, the completion may free the
	// slot and another send reuse it, and Completed must never pass Sent.
	z.c.Counters.Posted(total)
	if st := z.c.Send(ep, h.Index, n, total); st != netio.OK {
		z.c.Counters.Unposted(total)
		z.detach(slot)
		z.headers.ReturnHeader(h.Index)
		return st
	}
	return netio.OK
}

// postSend posts the n iovecs of header slot idx. It runs on the caller's
// goroutine, or on the poller goroutine for a queued send.
func (z *SendEndpointZeroCopy) postSend(ep *fabric.Endpoint, idx uint32, n int) fabric.Errno {
	slot := &z.slots[idx]
	return ep.Sendv(slot.iov[:n], slot.desc[:n], z.c.Owner.Context(idx))
}

// attach puts piece into iovec i of slot: through the declared region's
// registration when it lies inside it, else pinned and registered through
// the cache.
func (z *SendEndpointZeroCopy) attach(slot *zcSlot, i int, piece []byte) netio.Status {
	addr := uintptr(unsafe.Pointer(&piece[0]))
	slot.iov[i] = fabric.IOVec{Base: addr, Len: uint64(len(piece))}
	if r := z.region; r != nil && addr >= r.Addr() && addr+uintptr(len(piece)) <= r.Addr()+uintptr(r.Len()) {
		slot.desc[i] = r.Desc()
		return netio.OK
	}
	slot.pinners[i].Pin(&piece[0]) // no-op for memory outside the Go heap
	reg, err := z.cache.Acquire(addr, len(piece))
	if err != nil {
		if errors.Is(err, netio.ErrNoResources) {
			return netio.NoResources
		}
		return netio.Failed
	}
	slot.regs[i], slot.desc[i] = reg, reg.Desc()
	return netio.OK
}

// detach lets go of what a slot holds and unpins its Go memory; the
// caller then frees the header slot. Registrations go back to the cache,
// or are invalidated when they must not outlive the pin.
func (z *SendEndpointZeroCopy) detach(slot *zcSlot) {
	for i, reg := range slot.regs {
		if reg == nil {
			continue
		}
		z.cache.Release(reg)
		if !z.keepGo {
			z.cache.Invalidate(slot.iov[i].Base, int(slot.iov[i].Len))
		}
		slot.regs[i] = nil
	}
	for i := range slot.pinners {
		slot.pinners[i].Unpin()
	}
}

// MaxPieces returns the largest number of data pieces SendV accepts: the
// provider's iov_limit less the header's, at most 7.
func (z *SendEndpointZeroCopy) MaxPieces() int { return z.maxIOV - 1 }

// NumAvailableHeaders returns the fewest free header slots seen since the
// previous call.
func (z *SendEndpointZeroCopy) NumAvailableHeaders() int { return z.headers.NumAvailable() }

// PendingSends returns the keys of the sends in flight. It allocates.
func (z *SendEndpointZeroCopy) PendingSends() []uint64 { return z.headers.PendingSends() }

// RemoteAddr returns the address the endpoint was dialled with.
func (z *SendEndpointZeroCopy) RemoteAddr() string { return z.c.addr }

// Stats returns the endpoint's counters.
func (z *SendEndpointZeroCopy) Stats() SendStats { return sendStats(z.c.Counters.Read()) }

// Close ends the connection as SendEndpointBuffered.Close does: every
// pending key is reported with Canceled, after which the caller may reuse
// its data.
func (z *SendEndpointZeroCopy) Close() error { return z.c.close() }

// zeroCopyKind is the send core's view of a SendEndpointZeroCopy: its
// methods are not the endpoint's, so users cannot call them.
type zeroCopyKind SendEndpointZeroCopy

// Claim takes a send in flight back, once: its header slot's key is the
// caller's, and what the slot held (pins, registrations) is let go before
// the slot is free for another send.
func (k *zeroCopyKind) Claim(idx uint32) (uint64, bool) {
	key, ok := k.inFlight.Claim(idx, slots.SoleHolder)
	if !ok {
		return 0, false
	}
	(*SendEndpointZeroCopy)(k).detach(&k.slots[idx])
	k.inFlight.Release(idx, slots.SoleHolder)
	return key, true
}

// Pending lists the header slots of the sends in flight.
func (k *zeroCopyKind) Pending(dst []uint32) []uint32 {
	return k.inFlight.Posted(dst, slots.SoleHolder)
}

func (k *zeroCopyKind) HandleCompletion(idx uint32, r poll.Result) { k.c.Complete(k, idx, r) }
func (k *zeroCopyKind) CancelPending(error)                        { k.c.CancelAll(k) }
func (k *zeroCopyKind) Progress() (bool, uint64)                   { return k.c.Counters.Progress() }

// FillStats adds the header slots: a zero-copy send holds one in flight.
func (k *zeroCopyKind) FillStats(e *stats.Endpoint) {
	e.Buffers = k.inFlight.Len()
	e.FreeBuffers, e.MinFreeBuffers = k.inFlight.ReadFree()
}

// ReleaseResources frees the header slots, the endpoint's own cache and
// region; the endpoint is closed and every slot detached.
func (k *zeroCopyKind) ReleaseResources() error {
	z := (*SendEndpointZeroCopy)(k)
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
