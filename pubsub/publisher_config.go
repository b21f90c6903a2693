package pubsub

import (
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/cq"
	"github.com/netio-go/netio/domain"
)

// Defaults for PublisherConfig.
const (
	// DefaultSyncInterval is how many messages of a tag a subscriber gets
	// between two SYNC records when nothing was dropped.
	DefaultSyncInterval = 1024
	// DefaultMaxSubscribers caps the subscription connections a publisher
	// serves at once.
	DefaultMaxSubscribers = 1024
	// DefaultHelloTimeout is how long a new control connection may take to
	// say hello.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultDialTimeout bounds the publisher's dial of a subscriber's
	// data address.
	DefaultDialTimeout = 5 * time.Second
	// controlWriteTimeout bounds the write of one answer, so that a
	// subscriber that does not read cannot hold a control goroutine.
	controlWriteTimeout = 5 * time.Second
	// DefaultMaxInFlight is the default of PublisherConfig.MaxInFlight.
	DefaultMaxInFlight = 256
	// housekeepingTick is how often the publisher sends SYNC records owed
	// after drops and retries messages a Block subscriber could not take.
	housekeepingTick = 5 * time.Millisecond
)

// Policy decides what happens to a subscriber's copy of a message when
// that subscriber's connection has no room for it.
type Policy uint8

const (
	// DefaultPolicy lets the other side decide: a subscriber asking for it
	// gets the publisher's policy, a publisher configured with it uses
	// Block.
	DefaultPolicy Policy = iota
	// Block makes Publish return NoResources and take nothing, from
	// anyone, until the subscriber has room: nothing is lost, and a slow
	// subscriber slows the publisher.
	Block
	// Drop drops that subscriber's copy, counts it per tag, and tells the
	// subscriber (a SYNC record, which it reports as a gap). Other
	// subscribers are not slowed.
	Drop
)

// String returns "default", "block" or "drop".
func (p Policy) String() string {
	switch p {
	case Block:
		return policyBlock
	case Drop:
		return policyDrop
	case DefaultPolicy:
		return "default"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

func parsePolicy(s string) Policy {
	switch s {
	case policyBlock:
		return Block
	case policyDrop:
		return Drop
	}
	return DefaultPolicy
}

// Mode says how a publisher sends.
type Mode uint8

const (
	// Buffered coalesces each subscriber's messages into its send buffers
	// and posts a buffer when it is full or FlushInterval after its first
	// message (netio3's buffered mode).
	Buffered Mode = iota
	// Immediate posts every message at once, one libfabric message each
	// (still in the coalesced format, so subscribers read both modes).
	Immediate
	// ZeroCopy sends the caller's memory without copying it
	// (PublishZeroCopy): each message is one libfabric message of a small
	// header, copied into a registered header slot, and the caller's data,
	// which must not change until OnPublishCompleted reports its key. The
	// copying Publish variants return InvalidArgument in this mode.
	ZeroCopy
	// Shared coalesces as Buffered does, but once for all the subscribers
	// of a tag: the tags subscribed by the same set of subscribers share a
	// buffer, in registered memory, that is posted without copying to each
	// of them (a zero-copy send each) when full or FlushInterval after its
	// first message, and reused once every send of it completed. Each
	// buffer starts every tag's messages with a SYNC record, so a Drop
	// subscriber that had no room for a buffer (it loses the whole buffer)
	// reports exactly what it missed. Publish answers for the moment it
	// takes the message (OK, or NoResources when a Block subscriber still
	// has a buffer waiting or no buffer is free); copies dropped or failed
	// later are counted per tag. The publisher holds MaxInFlight buffers
	// of Send.BufferSize, and each subscriber at most Send.BufferCount of
	// them in flight: MaxInFlight must be at least twice Send.BufferCount.
	// A Drop subscriber with a buffer in flight already is sent another
	// only while Send.BufferCount buffers stay free (else its copy is
	// dropped), so stalled Drop subscribers cannot take the pool from the
	// others; stalled Block subscribers can, and then Publish answers
	// NoResources on every tag, taking nothing, until buffers come back.
	// Each distinct set of subscribers fills a buffer of its own, so Shared
	// suits publishers whose tags have few distinct subscriber sets: with
	// more such sets than MaxInFlight, Publish answers NoResources until
	// FlushInterval posts partly filled buffers.
	Shared
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Tags are the tags served from the start; AddTags adds more. ControlTag
	// is refused.
	Tags []uint64
	// FirstSequence gives the sequence number of a tag's first message;
	// nil starts every tag at 0. A publisher restarted under the same name
	// can continue its numbering, so that subscribers count exactly what
	// they missed across the restart.
	FirstSequence func(tag uint64) uint64
	// Numbering names the numbering this publisher's sequence numbers
	// follow, for subscribers whose tag moves from one publisher to
	// another (the bus names another): publishers given the same name
	// number each tag alike (a publisher restarted on another address that
	// continues its predecessor's count through FirstSequence, or
	// publishers that number from the front-end's own counter), so a
	// subscriber counts across such a move and reports what it missed as
	// a gap. Empty means the publisher's own numbering, named by its
	// subscription address: the same after a restart on that address, a
	// new count (no gap, TagStats.Moves) after a move to or from another.
	// At most MaxNumberingLen bytes.
	Numbering string
	// Mode is Buffered (the zero value), Immediate, ZeroCopy or Shared.
	Mode Mode
	// Policy applies to subscribers that ask for none; DefaultPolicy means
	// Block.
	Policy Policy
	// PolicyFor, when set, decides a subscriber's policy from its data
	// address and what it asked for (DefaultPolicy when it asked for none).
	// It runs on the subscriber's control goroutine.
	PolicyFor func(peer string, asked Policy) Policy
	// Send sets each subscriber connection's send buffers (netio3's
	// buffer_size and buffer_count); defaults apply to zero fields. A
	// message must fit in one buffer with its framing. A subscriber whose
	// receive buffers are smaller is refused at hello.
	Send netio.BufferedSendParams
	// FlushInterval is the longest a message waits in a partly filled
	// buffer (netio3's flush timeout). 0 selects
	// endpoint.DefaultCoalesceFlushInterval. In Immediate mode it only
	// bounds the wait when the provider's transmit queue was full.
	FlushInterval time.Duration
	// SyncInterval is the number of messages of a tag a subscriber gets
	// between two SYNC records; 0 selects DefaultSyncInterval. SYNC records
	// are also sent at the start of a subscription and after a drop.
	SyncInterval int
	// OnSubscribe is called when a subscriber subscribes to a tag, before
	// the publisher acknowledges, and once every tag of the same request
	// is in place (called for each); peer is its data address. It runs on that
	// subscriber's control goroutine and must not block for long. May be
	// nil.
	OnSubscribe func(tag uint64, peer string)
	// OnUnsubscribe is called when a subscription ends: the subscriber
	// unsubscribed, or went away (its control or data connection ended),
	// or the publisher closed. It runs on that subscriber's control
	// goroutine and must not block for long. May be nil.
	OnUnsubscribe func(tag uint64, peer string)
	// MaxSubscribers caps the control connections served at once; more
	// are refused with an error answer. 0 selects DefaultMaxSubscribers.
	MaxSubscribers int
	// HelloTimeout closes a control connection that has not said hello
	// after this long. 0 selects DefaultHelloTimeout.
	HelloTimeout time.Duration
	// DialTimeout bounds the dial of a subscriber's data address. 0
	// selects DefaultDialTimeout.
	DialTimeout time.Duration
	// AllowForeignDataHost lets a subscriber name a data address on
	// another host than the one its control connection comes from. By
	// default that is refused, so that a peer cannot make the publisher
	// dial third parties.
	AllowForeignDataHost bool
	// ZeroCopyRegion (ZeroCopy mode) is the registered memory the caller
	// publishes from, used by every subscriber's connection. Data outside
	// it (or without one) is pinned and registered through a registration
	// cache the publisher shares between its subscribers. The caller closes
	// it after the publisher.
	ZeroCopyRegion *domain.Registration
	// MaxInFlight (ZeroCopy mode) bounds the messages published and not
	// yet completed, and the sends in flight per subscriber; in Shared
	// mode it is the number of shared buffers. 0 selects
	// DefaultMaxInFlight.
	MaxInFlight int
	// OnPublishCompleted (ZeroCopy mode) is called once for every
	// PublishZeroCopy that returned OK or PartiallyFailed, when every
	// subscriber's send of it has completed: OK when all did, Failed when
	// none did (their connections ended), PartiallyFailed otherwise. From
	// then on the caller may reuse the data. It runs on the poller
	// goroutine, or a control goroutine when a connection ends, or the
	// PublishZeroCopy caller's own when every send completed before that
	// call returned, and must not block. May be nil.
	OnPublishCompleted func(key uint64, st Status)
	// Bus, when set, is told which tags this publisher serves (Announce),
	// kept current while it runs, and told when it closes (Withdraw).
	Bus Bus
	// BusID names this publisher on the bus. Empty derives one from the
	// host name, the process ID and the subscription address.
	BusID string
	// Runtime names the poller the data connections share (nil: the
	// publisher opens one) and the logger.
	cq.Runtime
}
