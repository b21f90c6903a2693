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
// Beyond that core: SendConfig.Coalesce packs small messages into buffers
// in netio3's format (SendMessage; the receiver sets OnMessage instead of
// OnData); SendConfig.Buffers and ListenConfig.Buffers lease buffers from a
// pool.Pool instead of registering a region per endpoint; DialZeroCopy
// sends the caller's memory without copying it; Expose, DialRMA, Pull and
// Push move bulk data by RMA; DialReconnecting keeps a sender connected
// across peer restarts and reports every message it could not send;
// ProgressTimeout, IdleTimeout, Admit and MaxConnections bound what a
// broken link or a hostile peer can hold; SendConfig.Replies (DialReplies)
// and ListenConfig.Replies (ListenReplies) carry messages back on the same
// connection, the listener's side sending with ReceiveEndpoint.GetBuffer
// and SendBuffer and the dialer receiving them in OnReply.
//
// # Threading
//
// Every endpoint belongs to a cq.Poller, one goroutine that reads its
// completion and event queues. All callbacks (OnSendCompleted, OnData,
// OnReply, OnConnectionEstablished, OnConnectionClosed, OnReceiveError,
// ListenReplies.OnSendCompleted) run on that goroutine, one at
// a time, and must not block: hand work to another goroutine instead. The
// other methods are safe for concurrent use. Close may be called from a
// callback.
//
// Sends of HandOffSize bytes or more from a dialled endpoint are posted by
// the poller goroutine too: SendEndpointBuffered.SendBuffer and the
// zero-copy Send queue them (and any send behind them, to keep the order)
// and return OK at once; see HandOffSize for why. ReceiveEndpoint.SendBuffer
// (ListenConfig.Replies) always posts from its caller's goroutine.
//
// # Ownership
//
// A buffer has one owner at a time: the endpoint's pool, the caller (after
// GetBuffer), or the provider (after SendBuffer returns OK). A completion,
// an error completion or the endpoint's teardown hands it back, and its key
// is reported exactly once.
package endpoint
