package endpoint_test

import (
	"context"
	"fmt"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// A receiver and a sender on loopback: Listen keeps buffers posted and
// hands every message to OnData; Dial returns a buffered send endpoint.
func Example() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close() // last: after every endpoint

	got := make(chan string, 1)
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: 4096, BufferCount: 16},
		// Runs on the poller goroutine; data is valid only during the call.
		OnData: func(_ *endpoint.ReceiveEndpoint, data []byte) { got <- string(data) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: 4096, BufferCount: 16},
		OnSendCompleted: func(key uint64, st netio.Status) {
			// The buffer with ID key is back in the pool.
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	buf := s.GetBuffer() // nil when all buffers are in flight
	n := copy(buf.Bytes(), "fragment 1")
	if st := s.SendBuffer(buf, n); st != netio.OK {
		fmt.Println("send:", st)
		return
	}
	fmt.Println(<-got)
	// Output: fragment 1
}

// ReleaseBuffer gives back a buffer that will not be sent; releasing it
// again is refused and changes nothing.
func ExampleSendEndpointBuffered_ReleaseBuffer() {
	mgr, _ := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	defer mgr.Close()
	l, _ := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{OnData: func(*endpoint.ReceiveEndpoint, []byte) {}})
	defer l.Close()
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	buf := s.GetBuffer()
	key, st := s.ReleaseBuffer(buf.ID())
	fmt.Println(key, st)
	_, st = s.ReleaseBuffer(buf.ID())
	fmt.Println(st)
	// Output:
	// 0 OK
	// InvalidArgument
}

// One connection both ways: the listener's side answers every request on
// the connection it came in on (ListenConfig.Replies), and the dialer gets
// the answers in OnReply (SendConfig.Replies).
func ExampleDialReplies() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()

	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Replies: &endpoint.ListenReplies{}, // each connection gets send buffers
		OnData: func(ep *endpoint.ReceiveEndpoint, req []byte) {
			buf := ep.GetBuffer()
			if buf == nil {
				return // all send buffers in flight: drop (or queue) this reply
			}
			n := copy(buf.Bytes(), "reply to "+string(req))
			if st := ep.SendBuffer(buf, n); st != netio.OK {
				// Not sent (NoResources, Closed, ...): the buffer is still ours.
				ep.ReleaseBuffer(buf.ID())
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()

	got := make(chan string, 1)
	s, err := endpoint.Dial(context.Background(), mgr, l.Addr(), endpoint.SendConfig{
		Replies: &endpoint.DialReplies{
			// Runs on the poller goroutine; data is valid only during the call.
			OnReply: func(_ *endpoint.SendEndpointBuffered, data []byte) { got <- string(data) },
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	buf := s.GetBuffer()
	n := copy(buf.Bytes(), "request 1")
	if st := s.SendBuffer(buf, n); st != netio.OK {
		fmt.Println("send:", st)
		return
	}
	fmt.Println(<-got)
	// Output: reply to request 1
}
