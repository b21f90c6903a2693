package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/internal/poll"
	"github.com/netio-go/netio/internal/sendcore"
	"github.com/netio-go/netio/internal/zerocopy"
	"github.com/netio-go/netio/stats"
)

// Defaults for ZeroCopyConfig.
const (
	DefaultHeaderSize  = zerocopy.DefaultHeaderSize
	DefaultHeaderCount = zerocopy.DefaultHeaderCount
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

// SendEndpointZeroCopy sends a small header copied into a registered slot
// followed by the caller's data, not copied, as one libfabric message
// (fi_sendv). The completion reports the caller's key; until then the data
// must not change.
type SendEndpointZeroCopy struct {
	c   sendConn
	cfg ZeroCopyConfig
	zc  zerocopy.Sends // header slots, pins, registrations: internal/zerocopy
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
	z := &SendEndpointZeroCopy{cfg: cfg}
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
	zs := c.settings()
	if err := zs.WithDefaults(mgr, "endpoint"); err != nil {
		return err
	}
	c.HeaderSize, c.HeaderCount, c.KeepGoRegistrations = zs.HeaderSize, zs.HeaderCount, zs.KeepGoRegistrations
	return nil
}

// settings are the zero-copy fields of c.
func (c *ZeroCopyConfig) settings() zerocopy.Settings {
	return zerocopy.Settings{HeaderSize: c.HeaderSize, HeaderCount: c.HeaderCount, Region: c.Region,
		SharedRegion: c.SharedRegion, Cache: c.Cache, KeepGoRegistrations: c.KeepGoRegistrations}
}

// prepare sets up the header slots, the region and the cache.
func (z *SendEndpointZeroCopy) prepare() error {
	if err := z.zc.Open(z.c.Mgr, z.cfg.settings()); err != nil {
		return err
	}
	z.c.InitHandOff(z.zc.Len(), z.postSend)
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
	if len(data) > z.zc.MaxPieces() {
		return netio.InvalidArgument // bad input first, closed or not
	}
	ep, ok := z.c.Guard.Acquire()
	if !ok {
		return netio.Closed
	}
	defer z.c.Guard.Release()
	return z.zc.Send(&z.c.Core, ep, header, data, key, 0, 0)
}

// postSend posts the n iovecs of header slot idx. It runs on the caller's
// goroutine, or on the poller goroutine for a queued send.
func (z *SendEndpointZeroCopy) postSend(ep *fabric.Endpoint, idx uint32, n int) fabric.Errno {
	return z.zc.Post(ep, idx, n, z.c.Owner.Context(idx))
}

// MaxPieces returns the largest number of data pieces SendV accepts: the
// provider's iov_limit less the header's, at most 7.
func (z *SendEndpointZeroCopy) MaxPieces() int { return z.zc.MaxPieces() }

// NumAvailableHeaders returns the fewest free header slots seen since the
// previous call.
func (z *SendEndpointZeroCopy) NumAvailableHeaders() int { return z.zc.NumAvailableHeaders() }

// FreeHeaders returns the header slots free now: how many sends may be
// posted before one completes. Unlike NumAvailableHeaders it starts no
// interval, so asking it changes nothing; a send's slot is free before
// OnSendCompleted reports it.
func (z *SendEndpointZeroCopy) FreeHeaders() int { return z.zc.FreeHeaders() }

// PendingSends returns the keys of the sends in flight. It allocates.
func (z *SendEndpointZeroCopy) PendingSends() []uint64 { return z.zc.PendingSends() }

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

// Claim takes a send in flight back, once (zerocopy.Sends.Claim).
func (k *zeroCopyKind) Claim(idx uint32) (uint64, bool) { return k.zc.Claim(idx) }

// Pending lists the header slots of the sends in flight.
func (k *zeroCopyKind) Pending(dst []uint32) []uint32 { return k.zc.Pending(dst, 0) }

func (k *zeroCopyKind) HandleCompletion(idx uint32, r poll.Result) { k.c.Complete(k, idx, r) }
func (k *zeroCopyKind) CancelPending(error)                        { k.c.CancelAll(k) }
func (k *zeroCopyKind) Progress() (bool, uint64)                   { return k.c.Counters.Progress() }

// FillStats adds the header slots: a zero-copy send holds one in flight.
func (k *zeroCopyKind) FillStats(e *stats.Endpoint) {
	e.Buffers, e.FreeBuffers, e.MinFreeBuffers = k.zc.ReadFree()
}

// ReleaseResources frees the header slots, the endpoint's own cache and
// region; the endpoint is closed and every slot detached.
func (k *zeroCopyKind) ReleaseResources() error { return k.zc.Release() }
