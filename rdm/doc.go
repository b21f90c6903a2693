// Package rdm has connectionless endpoints (FI_EP_RDM): one endpoint per
// process sends to, and receives from, many peers without a connection per
// pair (netio3's send_buffer(buffer, size, fi_addr_t)), over tcp;ofi_rxm
// and udp;ofi_rxd between hosts, sockets, and shm between processes of one
// host.
//
// An Endpoint binds a local address (Open; Addr reads back the address a
// peer uses, port 0 included), knows its peers by address (AddPeer,
// RemovePeer; a Peer is a small value), and keeps the connected endpoints'
// vocabulary: buffered sends by buffer ID (GetBuffer, SendBuffer to a peer,
// ReleaseBuffer, NumAvailableBuffers, PendingSends) from buffers of its
// own, a shared sendbuf.SendBufferManager or a pool.Pool; inject sends for
// small payloads; and receives into posted buffers, reposted at once, with
// the sender named in OnData. Every key is reported exactly once through
// OnSendCompleted, and Close reports what is pending as Canceled and leaves
// no goroutine, descriptor, registration or address-vector entry behind.
//
// It stands on the same send core as package endpoint (internal/sendcore):
// the post guard, the hand-off of large posts to the poller, the in-flight
// table of the send buffers' slot set, the counters and the watchdog. Open
// its domain with domain.Config.Endpoints = domain.EndpointRDM.
//
// Callbacks run on the poller goroutine and must not block.
package rdm
