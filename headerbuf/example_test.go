package headerbuf_test

import (
	"fmt"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/headerbuf"
)

// A zero-copy send: the header goes into a slot, the payload stays in the
// caller's memory, and the completion exchanges the slot for the key.
func Example() {
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mgr.Close()
	hb, err := headerbuf.New(mgr, 64, 128)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer hb.Close()

	const sendKey = 1234 // the send's completion context
	r := hb.GetHeader([]byte("seq=1"), sendKey)
	fmt.Println(r.Status, len(r.Header))
	// Post one fi_sendv with two iovecs: {r.Addr, len(r.Header)} with
	// hb.Desc(), then the payload with its own descriptor. When its
	// completion arrives:
	key, st := hb.ReturnHeader(r.Index)
	fmt.Println(st, key)
	// Output:
	// OK 5
	// OK 1234
}
