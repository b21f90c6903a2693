// Package quirks is the one table of what each libfabric 1.17 provider
// supports or breaks, with the reason, as far as the library acts on it.
// Code that behaves differently per provider asks For instead of naming
// providers; docs/providers.md tells users the same facts.
package quirks

import "strings"

// Quirks is what the library knows of a provider.
type Quirks struct {
	// DeliveryComplete: sends honour FI_DELIVERY_COMPLETE, completing only
	// once the peer placed the message (SendConfig.DeliveryComplete).
	DeliveryComplete bool
	// SoftwareRegistration: memory registration pins no physical pages, so
	// a registration of Go memory may outlive the pin (the zero-copy
	// endpoint then keeps it cached).
	SoftwareRegistration bool
	// CompletesWhenStaged: a send completes once the provider has copied
	// it into its own staging buffers, not when the peer took it; Close
	// discards what is still staged.
	CompletesWhenStaged bool
	// ShutdownCorrupts: fi_shutdown followed at once by fi_close corrupts
	// the provider's heap, so endpoints are closed without a shutdown
	// (fi_close alone tells the peer).
	ShutdownCorrupts bool
	// ProgressThread: the provider progresses on a thread of its own,
	// which a poller that spins without yielding can starve on few cores.
	// Pollers therefore yield between empty polls on every provider.
	ProgressThread bool
	// CapsInConnReq: a connection request carries the connecting
	// endpoint's caps, and the listener rejects it (ECONNREFUSED at the
	// dialer, nothing at the listener) unless they are a subset of its
	// own. Dials therefore ask for the least caps they use on every
	// provider, so that a plain FI_MSG peer accepts them.
	CapsInConnReq bool
	// ShutdownBeforeDelivered: the shutdown event can come while messages
	// the provider accepted still wait for posted buffers. Every receiving
	// connection (an accepted one, a dialled one with replies) therefore
	// drains after a shutdown (on every provider, as it costs only a quiet
	// period).
	ShutdownBeforeDelivered bool
	// PeekBuffered: the provider holds messages that came before a
	// buffer was posted in a list of its own, which only its progress
	// thread moves into posted buffers (fi_recv does not), at times more
	// than a second after the shutdown; it answers fi_recvmsg with FI_PEEK
	// at once from that list (FI_ENOMSG when it is empty). A drain after a
	// shutdown (ShutdownBeforeDelivered) therefore confirms its quiet
	// verdict with a peek (fabric.Endpoint.Peek). Providers without it
	// must not be peeked: tcp takes FI_PEEK for an ordinary receive.
	PeekBuffered bool
	// MissesEarlyClose: a peer's close that comes right after the accept
	// is sometimes never reported; ListenConfig.IdleTimeout reclaims such
	// connections.
	MissesEarlyClose bool
	// PassiveCloseReadsFreed: reading the event queue after fi_close of a
	// listening endpoint builds connection requests from freed memory, so
	// listeners close their passive endpoint only once the poller stopped
	// reading (poll.Poller.AtStop), on every provider.
	PassiveCloseReadsFreed bool
	// NamedAddresses: endpoints are named by strings the provider makes
	// (FI_ADDR_STR; shm), not by host and port: a domain needs no IP
	// address, and a peer learns an endpoint's name from the endpoint
	// itself (rdm.Endpoint.Addr) and inserts it as it is.
	NamedAddresses bool
	// UnknownSourceIsZero: a receive from a sender the receiver did not
	// insert reports source address 0, the first peer inserted, instead
	// of FI_ADDR_NOTAVAIL (shm in libfabric 1.17). The rdm endpoint
	// inserts its own name first, so that 0 names nobody it sends to.
	UnknownSourceIsZero bool
	// NoSources: a receive's source address is not the sender's address
	// in the receiver's address vector, known sender or not (ofi_rxd in
	// libfabric 1.17 reports 0 for every sender): receives cannot name
	// their sender, and the rdm endpoint reports the zero Peer.
	NoSources bool
	// StaleWaitEntries: closing an endpoint leaves its internal queues in
	// the wait set of the completion queue it was bound to (ofi_rxm in
	// libfabric 1.17: rxm_ep_close closes them without ofi_wait_del_fid),
	// and the next fi_trywait on that queue calls into the freed endpoint
	// (SIGSEGV in fi_trywait, in some runs after an endpoint of a shared
	// poller closed). Pollers of such a provider open their completion
	// queue without a wait object, so that nothing is added to a wait set,
	// and sleep on their wake-up descriptor at most 1 ms at a time.
	StaleWaitEntries bool
	// TruncationDrops: a message larger than the posted receive buffer
	// ends the connection instead of completing with a truncation error;
	// the receive endpoint names the truncation as the reason.
	TruncationDrops bool
	// RegionsSharedInProcess: the endpoints of one process use each
	// other's memory directly, and closing one unmaps it under the others
	// (shm in libfabric 1.17: an endpoint's shared region is found by name
	// in a process-wide list, ep_name_list, and the pointer kept; fi_close
	// unmaps the region but leaves it in the list). Another endpoint of
	// the process that then handles a message from the closed one, or
	// sends to it, touches unmapped memory (SIGSEGV in fi_cq_readfrom).
	// Between processes each maps the region itself, so a peer's close
	// takes nothing away. The rdm endpoint therefore opens one such
	// endpoint per process unless the caller accepts the close order
	// (rdm.Config.ShareProcess).
	RegionsSharedInProcess bool
}

// table holds the core providers by name. A layered provider ("tcp;ofi_rxm")
// has the quirks of the layers combined (see For).
var table = map[string]Quirks{
	// tcp completes a send with FI_DELIVERY_COMPLETE when the peer
	// acknowledges its placement; it registers in software. It would
	// complete sends once staged too, but fabric turns its staging buffer
	// off (fabric.TCPStagingEnv); a program that turns it back on has
	// CompletesWhenStaged without this table knowing.
	"tcp": {DeliveryComplete: true, SoftwareRegistration: true, PassiveCloseReadsFreed: true,
		TruncationDrops: true},
	// sockets completes sends once it has buffered them whatever is asked,
	// runs a progress thread, and fi_shutdown before fi_close corrupts its
	// heap.
	"sockets": {SoftwareRegistration: true, CompletesWhenStaged: true, ShutdownCorrupts: true, ProgressThread: true,
		CapsInConnReq: true, ShutdownBeforeDelivered: true, PeekBuffered: true, MissesEarlyClose: true},
	"udp": {SoftwareRegistration: true},
	"shm": {SoftwareRegistration: true, NamedAddresses: true, UnknownSourceIsZero: true, RegionsSharedInProcess: true},
	// The utility layers register through the core provider beneath them.
	"ofi_rxm": {SoftwareRegistration: true, StaleWaitEntries: true},
	"ofi_rxd": {SoftwareRegistration: true, NoSources: true},
}

// For returns the quirks of provider, "tcp" or a layered name such as
// "tcp;ofi_rxm": a capability holds only if every layer has it, and a
// defect of any layer is assumed for the whole until measured otherwise
// (the cautious side of each). An unknown provider is assumed to pin pages
// and to honour nothing it was not measured to honour.
func For(provider string) Quirks {
	layers := strings.Split(provider, ";")
	q := Quirks{DeliveryComplete: true, SoftwareRegistration: true, PeekBuffered: true}
	for _, name := range layers {
		l, known := table[name]
		if !known {
			return Quirks{}
		}
		q.DeliveryComplete = q.DeliveryComplete && l.DeliveryComplete
		q.SoftwareRegistration = q.SoftwareRegistration && l.SoftwareRegistration
		q.CompletesWhenStaged = q.CompletesWhenStaged || l.CompletesWhenStaged
		q.ShutdownCorrupts = q.ShutdownCorrupts || l.ShutdownCorrupts
		q.ProgressThread = q.ProgressThread || l.ProgressThread
		q.CapsInConnReq = q.CapsInConnReq || l.CapsInConnReq
		q.ShutdownBeforeDelivered = q.ShutdownBeforeDelivered || l.ShutdownBeforeDelivered
		q.PeekBuffered = q.PeekBuffered && l.PeekBuffered // the peek goes to the top layer
		q.MissesEarlyClose = q.MissesEarlyClose || l.MissesEarlyClose
		q.PassiveCloseReadsFreed = q.PassiveCloseReadsFreed || l.PassiveCloseReadsFreed
		q.TruncationDrops = q.TruncationDrops || l.TruncationDrops
		q.NamedAddresses = q.NamedAddresses || l.NamedAddresses
		q.UnknownSourceIsZero = q.UnknownSourceIsZero || l.UnknownSourceIsZero
		q.NoSources = q.NoSources || l.NoSources
		q.StaleWaitEntries = q.StaleWaitEntries || l.StaleWaitEntries
		q.RegionsSharedInProcess = q.RegionsSharedInProcess || l.RegionsSharedInProcess
	}
	return q
}
