package rdm

import (
	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/zerocopy"
)

// ZeroCopyConfig gives an Endpoint header slots for zero-copy sends
// (Config.ZeroCopy): SendZeroCopy sends a small header copied into a
// registered slot followed by the caller's data, not copied, as one
// libfabric message to a peer, as endpoint.SendEndpointZeroCopy does on a
// connection. Which memory is safe is as there (see endpoint.ZeroCopyConfig).
type ZeroCopyConfig struct {
	// HeaderSize is the size of a header slot: the largest header. 0
	// selects endpoint.DefaultHeaderSize (64).
	HeaderSize int
	// HeaderCount is the number of header slots, and so the most zero-copy
	// sends in flight. 0 selects endpoint.DefaultHeaderCount (128).
	HeaderCount int
	// Region is memory the caller declares up front, registered once for
	// this endpoint; data inside it uses that registration. Go memory given
	// here stays pinned until Close.
	Region []byte
	// SharedRegion is memory registered once per domain by the caller
	// (outside the Go heap, or pinned by the caller while registered); the
	// caller closes it after the endpoints.
	SharedRegion *domain.Registration
	// Cache registers data outside the regions. Nil gives the endpoint its
	// own, closed with it.
	Cache *domain.RegistrationCache
	// KeepGoRegistrations keeps registrations of Go memory cached after the
	// send completes. Nil selects true on software-registration providers
	// (all the RDM providers here) and false elsewhere.
	KeepGoRegistrations *bool
	// OnSendCompleted is called once per zero-copy send with the key the
	// caller gave SendZeroCopy and OK, Failed (an error completion: the
	// peer died or was removed while the send was pending; the log says
	// why) or Canceled (the endpoint closed first). From then on the
	// caller may reuse the data. It runs on the poller goroutine and must
	// not block. May be nil.
	OnSendCompleted func(key uint64, status netio.Status)
}

func (c *ZeroCopyConfig) settings() zerocopy.Settings {
	return zerocopy.Settings{HeaderSize: c.HeaderSize, HeaderCount: c.HeaderCount, Region: c.Region,
		SharedRegion: c.SharedRegion, Cache: c.Cache, KeepGoRegistrations: c.KeepGoRegistrations}
}

// onSendCompleted is nil for a nil config.
func (c *ZeroCopyConfig) onSendCompleted() func(uint64, netio.Status) {
	if c == nil {
		return nil
	}
	return c.OnSendCompleted
}

// validate fills defaults and checks c against mgr.
func (c *ZeroCopyConfig) validate(mgr *domain.Manager) error {
	if c == nil {
		return nil
	}
	zs := c.settings()
	if err := zs.WithDefaults(mgr, "rdm"); err != nil {
		return err
	}
	c.HeaderSize, c.HeaderCount, c.KeepGoRegistrations = zs.HeaderSize, zs.HeaderCount, zs.KeepGoRegistrations
	return nil
}

// SendZeroCopy sends header (copied into a header slot) followed by data
// (not copied) to peer as one message; OnSendCompleted of Config.ZeroCopy
// reports key once. Until then data must not change. It returns OK when
// queued for the poller, which posts it in order with the other sends;
// NoResources when no header slot is free or the registration limit is
// reached (retry after completions); InvalidArgument, changing nothing,
// without Config.ZeroCopy, for a header larger than a slot, more than
// MaxPieces pieces, or an unknown or removed peer; Closed after Close;
// Failed when data cannot be registered. It does not allocate.
func (e *Endpoint) SendZeroCopy(header, data []byte, key uint64, to Peer) netio.Status {
	pieces := [1][]byte{data}
	return e.SendZeroCopyV(header, pieces[:], key, to)
}

// SendZeroCopyV is SendZeroCopy with the data in several pieces, gathered
// into one message after the header.
func (e *Endpoint) SendZeroCopyV(header []byte, data [][]byte, key uint64, to Peer) netio.Status {
	if e.cfg.ZeroCopy == nil || len(data) > e.zc.MaxPieces() {
		return netio.InvalidArgument // bad input first, closed or not
	}
	ep, st := e.acquireFor(to)
	if st != netio.OK {
		return st
	}
	defer e.c.Guard.Release()
	return e.zc.Send(&e.c, ep, header, data, key, to.word(), zcMark)
}

// MaxPieces returns the largest number of data pieces SendZeroCopyV takes
// (0 without Config.ZeroCopy).
func (e *Endpoint) MaxPieces() int {
	if e.cfg.ZeroCopy == nil {
		return 0
	}
	return e.zc.MaxPieces()
}

// NumAvailableHeaders returns the fewest free header slots seen since the
// previous call (0 without Config.ZeroCopy).
func (e *Endpoint) NumAvailableHeaders() int {
	if e.cfg.ZeroCopy == nil {
		return 0
	}
	return e.zc.NumAvailableHeaders()
}

// PendingZeroCopy returns the keys of the zero-copy sends in flight. It
// allocates; use it for diagnostics.
func (e *Endpoint) PendingZeroCopy() []uint64 {
	if e.cfg.ZeroCopy == nil {
		return nil
	}
	return e.zc.PendingSends()
}
