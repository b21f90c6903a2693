// Command loopback sends 1000 messages of 4 KiB from a buffered send endpoint
// to a listener in the same process over libfabric's tcp provider on
// 127.0.0.1, checks every byte on arrival, and prints a one-line summary. It
// exits non-zero on any error.
//
//	go run ./examples/loopback
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

const (
	messages = 1000
	msgSize  = 4 << 10
	timeout  = 10 * time.Second
)

// fill writes the pattern of message seq: an 8-byte sequence number, then
// bytes that depend on seq and their offset.
func fill(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq + uint64(i))
	}
}

// check verifies a received message and returns its sequence number.
func check(b []byte) (uint64, error) {
	if len(b) != msgSize {
		return 0, fmt.Errorf("message of %d bytes, want %d", len(b), msgSize)
	}
	seq := binary.LittleEndian.Uint64(b)
	if seq >= messages {
		return 0, fmt.Errorf("bad sequence number %d", seq)
	}
	for i := 8; i < len(b); i++ {
		if want := byte(seq + uint64(i)); b[i] != want {
			return 0, fmt.Errorf("message %d: byte %d is %#x, want %#x", seq, i, b[i], want)
		}
	}
	return seq, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loopback:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// One domain per provider and local address. Give the address
	// explicitly, or the provider may pick another interface.
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		return err
	}
	// Deferred closes run in reverse: sender, listener, then the domain.
	defer func() { err = errors.Join(err, mgr.Close()) }()

	// Callbacks run on a poller goroutine and must not block: they only
	// count, and report the first error without waiting.
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default: // an earlier error is already waiting
		}
	}
	var (
		seen      [messages]bool // touched only by the listener's poller goroutine
		received  atomic.Int64
		completed atomic.Int64
		allIn     = make(chan struct{})    // closed when every message has arrived
		allSent   = make(chan struct{})    // closed when every send has completed
		freed     = make(chan struct{}, 1) // a send buffer came back
		finished  atomic.Bool              // set before we close on purpose
	)

	// The receiver keeps 64 buffers of 4 KiB posted per connection.
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: msgSize, BufferCount: 64},
		OnData: func(_ *endpoint.ReceiveEndpoint, data []byte) {
			// data is valid only during this call: check it here and
			// copy whatever you want to keep.
			seq, err := check(data)
			if err == nil && seen[seq] {
				err = fmt.Errorf("message %d received twice", seq)
			}
			if err != nil {
				fail(err)
				return
			}
			seen[seq] = true
			if received.Add(1) == messages {
				close(allIn)
			}
		},
		OnConnectionClosed: func(_ *endpoint.ReceiveEndpoint, err error) {
			if !finished.Load() {
				fail(fmt.Errorf("receiver: connection closed early: %w", err))
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.Close()) }()

	// The sender owns 64 registered buffers of 4 KiB. Each completion hands
	// one back and reports its key (the buffer ID) exactly once.
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: msgSize, BufferCount: 64},
		OnSendCompleted: func(key uint64, st netio.Status) {
			if st != netio.OK && !finished.Load() {
				fail(fmt.Errorf("send from buffer %d: %v", key, st))
			}
			if completed.Add(1) == messages {
				close(allSent)
			}
			select { // wake the sending loop if it waits for a buffer
			case freed <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Close()) }()

	// wait blocks until ch is ready, a callback failed, or time is up.
	wait := func(ch <-chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case err := <-failed:
			return err
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}

	start := time.Now()
	for seq := uint64(0); seq < messages; seq++ {
		buf := s.GetBuffer()
		for buf == nil { // all 64 buffers in flight: wait for a completion
			if err := wait(freed, "a free send buffer"); err != nil {
				return err
			}
			buf = s.GetBuffer()
		}
		fill(buf.Bytes()[:msgSize], seq)
		// OK: the buffer is the endpoint's until its completion.
		// NoResources: the transmit queue is full; we keep buf and retry.
		for st := s.SendBuffer(buf, msgSize); st != netio.OK; st = s.SendBuffer(buf, msgSize) {
			if st != netio.NoResources || ctx.Err() != nil {
				return fmt.Errorf("send %d: %v", seq, st)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	if err := wait(allIn, "all messages to arrive"); err != nil {
		return err
	}
	elapsed := time.Since(start)
	if err := wait(allSent, "all sends to complete"); err != nil {
		return err
	}

	finished.Store(true)
	fmt.Printf("loopback: %d messages x %d B sent and verified over %s in %v (%.0f MB/s)\n",
		messages, msgSize, mgr.Provider(), elapsed.Round(time.Microsecond),
		float64(messages*msgSize)/elapsed.Seconds()/1e6)
	return nil
}
