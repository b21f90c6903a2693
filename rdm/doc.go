// Package rdm has connectionless endpoints (FI_EP_RDM): one endpoint per
// process sends to, and receives from, many peers without a connection per
// pair (netio3's send_buffer(buffer, size, fi_addr_t)), over tcp;ofi_rxm
// and udp;ofi_rxd between hosts, sockets, and shm between processes of one
// host. On shm open one endpoint per process: Open refuses a second
// (ErrOneEndpointPerProcess) unless all set Config.ShareProcess.
//
// An Endpoint binds a local address (Open; Addr reads back the address a
// peer uses, port 0 included), knows its peers by address (AddPeer,
// RemovePeer; a Peer is a small value), and keeps the connected endpoints'
// vocabulary: buffered sends by buffer ID (GetBuffer, SendBuffer to a peer,
// ReleaseBuffer, NumAvailableBuffers, PendingSends) from buffers of its
// own, a shared sendbuf.SendBufferManager or a pool.Pool; zero-copy sends
// of a header slot and the caller's memory (Config.ZeroCopy,
// SendZeroCopy); small messages coalesced in netio3's format with one
// buffer per peer (Config.Coalesce, SendMessage, decoded by
// Config.OnMessage); inject sends for small payloads through a queue that
// never blocks (Inject); and receives into posted buffers, reposted at
// once, with the sender named in OnData. Every key is reported exactly once
// through OnSendCompleted, also for sends to a peer that was removed or,
// on tcp;ofi_rxm and sockets, died (Failed; a dead peer holds up no other
// peer, see Config.PeerTimeout; shm and udp;ofi_rxd keep such sends in
// flight until Config.ProgressTimeout, which shm refuses with
// Config.ShareProcess), and Close reports what is pending
// as Canceled and
// leaves no goroutine, descriptor, registration or address-vector entry
// behind.
//
// It stands on the same send core as package endpoint (internal/sendcore):
// the post guard, the hand-off of posts to the poller, the in-flight table
// of slot sets, the counters and the watchdog; and on the same zero-copy
// send (internal/zerocopy) and coalescer (internal/coalescer). Open its
// domain with domain.Config.Endpoints = domain.EndpointRDM.
//
// Callbacks run on the poller goroutine and must not block.
//
// A sender that streams small messages to a peer (up to the provider's
// eager size, 16 KiB on tcp;ofi_rxm) costs least as one busy goroutine, as
// a C sender is one thread: post the next messages from OnSendCompleted
// (GetBuffer, fill, SendBuffer), where a send is posted at once on the
// poller goroutine, and let the application's goroutine post the first
// window and sleep until the callback hands it a send refused for now
// (NoResources) or the end. A goroutine woken to refill the window costs a
// thread wake-up per wake on each side of the hand-off and its own Go
// runtime work, which on a busy host is a large part of a small message's
// cost (docs/performance.md; cmd/netio-perf's rdm client is written so,
// rdmrefill.go).
package rdm
