package rdm

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/quirks"
	"github.com/netio-go/netio/sendbuf"
)

// DefaultMaxPeers sizes the address vector when Config.MaxPeers is 0:
// libfabric's FI_UNIVERSE_SIZE default, which also bounds the peers the
// utility providers (ofi_rxm, ofi_rxd) track.
const DefaultMaxPeers = 256

// Config configures a connectionless endpoint.
type Config struct {
	// Send sets the send buffers' size and count; defaults apply to zero
	// fields.
	Send netio.BufferedSendParams
	// Buffers says where the send buffers come from: the zero value
	// registers the endpoint's own, sendbuf.Shared and sendbuf.Pooled name
	// the others.
	Buffers sendbuf.Source
	// Receive sets the receive buffers kept posted; defaults apply to zero
	// fields. A message larger than Receive.BufferSize is an error.
	Receive netio.ReceiveParams
	// MaxPeers sizes the address vector. 0 selects DefaultMaxPeers.
	MaxPeers int
	// OnData is called once per message received, with its sender (the
	// zero Peer when the provider cannot name it) and the data, which is
	// valid only during the call: copy what you keep. The buffer is posted
	// again when it returns. It runs on the poller goroutine and must not
	// block. Exactly one of OnData and OnMessage is required.
	OnData func(e *Endpoint, from Peer, data []byte)
	// OnMessage, instead of OnData, decodes every received message as a
	// buffer in netio3's coalesced format (what a coalescing sender sends,
	// CoalesceConfig) and is called once per message in it, in order, with
	// the sender, the tag, the payload (valid only during the call) and
	// the message's status. A malformed buffer delivers its valid prefix
	// and is reported to OnReceiveError. It runs on the poller goroutine
	// and must not block.
	OnMessage func(e *Endpoint, from Peer, tag uint64, data []byte, status uint8)
	// OnSendCompleted is called once per buffer handed to SendBuffer (or
	// posted by coalescing), with its key (the buffer's ID) and the
	// outcome: OK when the provider completed the send; Failed for an
	// error completion (a peer that died), a queued send the provider
	// refused, one to a peer removed before the poller posted it, or one
	// to a peer that took nothing for PeerTimeout (the log says which);
	// Canceled when the endpoint closed first. The buffer is back in the
	// pool when it runs. It runs on the poller goroutine and must not
	// block. May be nil. Zero-copy sends report to
	// ZeroCopyConfig.OnSendCompleted instead.
	OnSendCompleted func(key uint64, status netio.Status)
	// OnReceiveError is called for a receive that failed (a message larger
	// than the buffers, say); the buffer is posted again. It is also
	// called for a buffer the provider refused to take again, twice in a
	// row when it said EAGAIN: that buffer stays out of use, and the error
	// says so. It runs on the poller goroutine and must not block. May be
	// nil.
	OnReceiveError func(e *Endpoint, err error)
	// ProgressTimeout closes the endpoint when sends are pending and none
	// has completed for this long, reporting them Canceled: a provider
	// that never completes a send to a dead peer then cannot hold the
	// buffers forever. 0 disables it. On shm it cannot go with
	// ShareProcess (see there).
	ProgressTimeout time.Duration
	// Coalesce, when set, turns on small-message coalescing with one
	// coalescing buffer per peer: SendMessage, SendMessageV,
	// SendMessageStatus and Flush. The endpoint then owns its send
	// buffers. See CoalesceConfig.
	Coalesce *CoalesceConfig
	// PeerTimeout is how long sends to one peer may wait for the provider
	// to take them (ofi_rxm refuses every send to a peer whose process
	// died, for ever) before they fail with Failed, each reported once;
	// sends to the other peers go on meanwhile. A receiver that stalls
	// (back-pressure) makes the provider refuse sends too: set it well above
	// the longest stall a healthy peer may impose. 0 selects
	// DefaultPeerTimeout.
	PeerTimeout time.Duration
	// ZeroCopy, when set, gives the endpoint header slots for SendZeroCopy.
	ZeroCopy *ZeroCopyConfig
	// InjectQueue is the number of injects that may wait for the poller
	// goroutine (Inject). 0 selects DefaultInjectQueue. A sender that
	// streams injects and waits in WaitInject wants half the queue to take
	// the poller longer to post than a sleeping goroutine takes to wake on
	// a busy machine (docs/performance.md, "rdm 64 B inject: the full
	// queue's wait"): a few hundred on tcp;ofi_rxm (netio-perf client
	// --inject uses 1024, which also cuts the sender's wake-ups per
	// message).
	// The last inject to a slow peer holds a slot for up to half
	// PeerTimeout (see Inject): with InjectQueue slow peers the queue is
	// full.
	InjectQueue int
	// InjectLinger bounds how long Close waits for the provider to
	// confirm sent the injects it took (see Inject); what is still
	// unconfirmed then is counted in Stats.InjectsUnconfirmed. It stops
	// sooner once nothing is queued and either every taken inject is
	// confirmed and no tracked inject is in flight, or no send is pending
	// (nothing could confirm the rest). Close called
	// from a callback of another domain's endpoint blocks that poller
	// meanwhile. 0 selects DefaultInjectLinger; a negative value closes
	// without waiting.
	InjectLinger time.Duration
	// ShareProcess lets an shm endpoint open while other shm endpoints of
	// the process are open, if each of them set it too; without it Open
	// refuses a second one with an error matching
	// ErrOneEndpointPerProcess (see there for why). Setting it is a
	// promise about the order of closes: close an endpoint only once every
	// other endpoint of the process has received all it sent (their
	// OnData ran for each message) and will send it nothing more; anything
	// else can crash the process inside libfabric 1.17. Any close of the
	// libfabric endpoint counts, not only Close: the library must not close
	// it either, so Open refuses ShareProcess with ProgressTimeout on shm
	// (netio.ErrInvalidArgument), whose teardown closes the endpoint
	// exactly when its sends are pending. (The domain's Close does not
	// close it: it is refused while the endpoint's registrations live.)
	// Tools that keep both sides of an exchange in one process
	// (netio-perf's rdm sweep) set it. Other providers ignore it.
	ShareProcess bool
	// Runtime names the poller to share and the logger.
	cq.Runtime
}

func (c *Config) validate(mgr *domain.Manager) error {
	if mgr == nil {
		return fmt.Errorf("%w: rdm: nil domain", netio.ErrInvalidArgument)
	}
	if mgr.Endpoints() != domain.EndpointRDM {
		return fmt.Errorf("%w: rdm: the domain serves %v endpoints; open it with Endpoints: domain.EndpointRDM",
			netio.ErrInvalidArgument, mgr.Endpoints())
	}
	if (c.OnData == nil) == (c.OnMessage == nil) {
		return fmt.Errorf("%w: rdm: exactly one of OnData and OnMessage is required", netio.ErrInvalidArgument)
	}
	if err := c.Coalesce.validate(); err != nil {
		return err
	}
	c.Send, c.Receive = c.Send.WithDefaults(), c.Receive.WithDefaults()
	if err := c.Send.Validate(); err != nil {
		return err
	}
	if err := c.Receive.Validate(); err != nil {
		return err
	}
	if c.MaxPeers < 0 || c.ProgressTimeout < 0 || c.PeerTimeout < 0 || c.InjectQueue < 0 || c.InjectQueue > netio.MaxBufferCount {
		return fmt.Errorf("%w: rdm: MaxPeers %d, ProgressTimeout %v, PeerTimeout %v or InjectQueue %d out of range",
			netio.ErrInvalidArgument, c.MaxPeers, c.ProgressTimeout, c.PeerTimeout, c.InjectQueue)
	}
	if c.ShareProcess && c.ProgressTimeout > 0 && quirks.For(mgr.Provider()).RegionsSharedInProcess {
		return fmt.Errorf("%w: rdm: ShareProcess with ProgressTimeout %v on %s: the timeout's teardown closes the endpoint while its sends are pending, which can crash the process (see ShareProcess)",
			netio.ErrInvalidArgument, c.ProgressTimeout, mgr.Provider())
	}
	if c.PeerTimeout == 0 {
		c.PeerTimeout = DefaultPeerTimeout
	}
	if c.MaxPeers == 0 {
		c.MaxPeers = DefaultMaxPeers
	}
	if c.InjectQueue == 0 {
		c.InjectQueue = DefaultInjectQueue
	}
	if c.InjectLinger == 0 {
		c.InjectLinger = DefaultInjectLinger
	}
	if c.ZeroCopy != nil {
		zc := *c.ZeroCopy // the caller's config stays as it was
		if err := zc.validate(mgr); err != nil {
			return err
		}
		c.ZeroCopy = &zc
	}
	return c.Buffers.Check(mgr)
}
