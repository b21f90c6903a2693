// Package pubsub publishes messages by tag to any number of subscribers,
// the readout pattern of the netio family (FELIX): a Publisher serves tags
// (one per detector link, say), Subscribers subscribe to the tags they
// want, find the publishers through a Bus, and get every message of those
// tags, small messages coalesced.
//
// # Connections and wire
//
// A subscriber opens one TCP control connection to each publisher it needs
// (the publisher's subscription port, Publisher.Addr) and says hello with
// its data address; the publisher dials that address with an endpoint of
// package endpoint, so the data flows over libfabric in netio3's coalesced
// format (package coalesce), one data connection per subscriber whatever
// the number of tags. Subscriptions are JSON lines on the control
// connection and are acknowledged: Subscribe returns once the publisher has
// taken the subscription, and every message published after that is
// delivered or, if lost (a Drop, a connection that broke), reported as a
// gap. docs/wire.md specifies both connections for a C or C++ peer.
//
// # Sequence numbers and gaps
//
// Each tag is numbered at its publisher. The numbers travel in SYNC records
// (messages of ControlTag, which a plain reader of the coalesced format can
// skip) only where a subscriber's count would break: at the start of a
// subscription, after a drop, and every SyncInterval messages. A
// subscriber reports every message it did not get as a Gap (OnGap) and
// counts it per tag (TagStats): copies dropped for it, and messages lost
// while a connection was down. Nothing is lost silently.
//
// Numbers are compared within one numbering only: a publisher's own (kept
// across a restart on the same address), or one that several publishers
// share (PublisherConfig.Numbering). A subscriber takes each tag from one
// publisher at a time, the one the bus named, while it can reach it; when
// the tag moves to a publisher of another numbering, its count starts
// afresh there, without a gap, and the move is counted (TagStats.Moves).
//
// # Back-pressure
//
// A subscriber that falls behind fills its data connection. Its policy
// decides what happens then: Block makes Publish return NoResources and
// take the message from nobody (the caller retries, waiting in WaitRoom;
// nothing is lost and the publisher goes at the pace of its slowest Block
// subscriber), Drop drops
// that subscriber's copy, counts it, and reports it to the subscriber as a
// gap, without slowing anyone else.
//
// # Threading
//
// Publish and its variants never block, never allocate in steady state,
// and are safe for concurrent use; the messages of one tag go out in the
// order of the calls. A subscriber's OnMessage, OnBuffer and OnGap run on
// its data poller's goroutine, one at a time, and must not block: a
// callback that blocks stops every data connection of that subscriber and,
// through back-pressure, stalls its publishers (Block) or makes them drop
// its messages (Drop). Hand work to another goroutine. The callbacks about
// subscriptions (OnSubscribed, OnRefused, OnLost, OnRestored, and the
// publisher's OnSubscribe and OnUnsubscribe) run on control goroutines and
// must not block for long. Subscribe, Unsubscribe, Close and WaitRoom block
// and must not be called from a callback.
//
// A subscriber's own data poller spins DefaultSubscriberSpinBudget (10 µs)
// after work before it sleeps, not the 200 µs of other pollers: it has no
// reply to catch, and where publishers and subscribers share the cores a
// spinning subscriber takes the CPU they need. Messages that come further
// apart pay a wake-up, tens of µs; SubscriberConfig.PollerConfig.SpinBudget
// sets another budget. That poller runs on an OS thread of its own, and
// yields between empty polls with sched_yield alone, while this leaves a
// P to the process's other goroutines (GOMAXPROCS exceeds the pollers of
// the process's Subscribers so locked by more than one): an unlocked
// poller's runtime.Gosched hands it to another thread and back, two
// context switches in every gap of a stream.
//
// # Modes
//
// A publisher is Buffered (messages coalesced per subscriber, a buffer
// posted when full or FlushInterval after its first message), Immediate
// (one libfabric message per message) or ZeroCopy (PublishZeroCopy sends
// the caller's memory, ideally a registered ZeroCopyRegion, without copying,
// and OnPublishCompleted reports the caller's key once every subscriber's
// send of it completed) or Shared (each message encoded once into a buffer
// sent to every subscriber of its tags). Subscribers read all four alike.
//
// # Reconnection and lifetime
//
// A subscriber whose publisher goes away reconnects with backoff, through
// the bus (a publisher that comes back on another address is found again),
// subscribes again, and reports what it missed (OnLost, then OnRestored,
// and OnGap as the data comes). A subscriber that goes away loses its
// subscriptions at the publisher at once, and its connection's buffers
// come back. Close on either side leaves no goroutine, connection or
// registration behind.
package pubsub
