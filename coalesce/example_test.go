package coalesce_test

import (
	"errors"
	"fmt"

	"github.com/netio-go/netio/coalesce"
)

// A sender appends messages until the buffer is full, sends it, and appends
// the message that did not fit to a fresh buffer.
func ExampleEncoder() {
	send := func(b []byte) { fmt.Printf("send %d bytes\n", len(b)) }

	buf := make([]byte, 40) // in an endpoint: a registered send buffer
	e := coalesce.NewEncoder(buf)
	for i, word := range []string{"alpha", "beta", "gamma", "delta"} {
		err := e.Append(uint64(i%2), 0, []byte(word))
		if errors.Is(err, coalesce.ErrFull) {
			send(e.Bytes())
			e.Reset(buf) // the next buffer; here the same memory, already sent
			err = e.Append(uint64(i%2), 0, []byte(word))
		}
		if err != nil { // ErrTooLarge: no buffer of this size can hold it
			fmt.Println(err)
			return
		}
	}
	send(e.Bytes())
	// Output:
	// send 33 bytes
	// send 34 bytes
}

// A receiver hands every message of a received buffer to a callback; a
// malformed buffer is reported with where it breaks.
func ExampleDecode() {
	buf := make([]byte, 64)
	e := coalesce.NewEncoder(buf)
	_ = e.Append(7, 0, []byte("hello"))
	_ = e.Append(7, 3, []byte("world"))
	received := e.Bytes()

	show := func(tag uint64, data []byte, status uint8) {
		fmt.Printf("tag %d status %d: %s\n", tag, status, data)
	}
	if err := coalesce.Decode(received, show); err != nil {
		fmt.Println(err)
	}
	err := coalesce.Decode(received[:len(received)-1], show)
	fmt.Println(errors.Is(err, coalesce.ErrMalformed), err)
	// Output:
	// tag 7 status 0: hello
	// tag 7 status 3: world
	// tag 7 status 0: hello
	// true coalesce: malformed buffer: message 1 at offset 17: payload of 5 bytes exceeds the 4 bytes left
}

// A Decoder walks a buffer without a callback.
func ExampleDecoder() {
	e := coalesce.NewEncoder(make([]byte, 64))
	_ = e.Append(1, 0, []byte("a"))
	_ = e.Append(2, 0, []byte("b"))

	d := coalesce.NewDecoder(e.Bytes())
	for d.Next() {
		fmt.Printf("%d:%s ", d.Tag(), d.Data())
	}
	fmt.Println(d.Err())
	// Output: 1:a 2:b <nil>
}

// Overhead sizes buffers: an empty buffer must hold the largest message with
// its tag and status.
func ExampleOverhead() {
	const largest = 4000 // bytes of payload
	fmt.Println(largest + coalesce.Overhead(1, true))
	// Output: 4013
}
