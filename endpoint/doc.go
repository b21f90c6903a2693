// Package endpoint connects processes over libfabric message endpoints.
//
// Dial connects to a listener and returns a SendEndpointBuffered: it sends
// from registered buffers that GetBuffer hands out, each SendBuffer is one
// libfabric message of exactly the given size, and every completion hands
// the buffer back and reports its key through OnSendCompleted. Listen
// accepts every connection request and runs a ReceiveEndpoint per
// connection that keeps its buffers posted and passes each message to
// OnData.
//
// # Threading
//
// Every endpoint belongs to a cq.Poller, one goroutine that reads its
// completion and event queues. All callbacks (OnSendCompleted, OnData,
// OnConnectionEstablished, OnConnectionClosed) run on that goroutine, one at
// a time, and must not block: hand work to another goroutine instead. The
// other methods are safe for concurrent use. Close may be called from a
// callback.
//
// # Ownership
//
// A buffer has one owner at a time: the endpoint's pool, the caller (after
// GetBuffer), or the provider (after SendBuffer returns OK). A completion,
// an error completion or the endpoint's teardown hands it back, and its key
// is reported exactly once.
package endpoint
