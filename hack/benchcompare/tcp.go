package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/netio-go/netio/internal/cputime"
	"github.com/netio-go/netio/internal/latency"
)

// The Go TCP side: the same messages over one net.TCPConn on 127.0.0.1,
// each a 4-byte little-endian length and the payload. Plain, a message is
// one Write and two io.ReadFull calls; with bufio both ends go through
// 64 KiB buffers and a sender flushes only when it has to (at the end, or
// before waiting for a reply).

const (
	lenPrefix        = 4
	bufioSize        = 64 << 10
	pingPongMax      = 100000 // timed round trips at most
	pingPongWarm     = 10     // round trips left out, as netio-perf and C do
	pingPongMinTimed = 10     // round trips timed at least, even past the duration
	checkClockAt     = 64     // messages between two looks at the clock
	tcpSlack         = 30 * time.Second
	maxBandwidthN    = 4 << 20 // messages at most, as netio-perf's budget
	maxBandwidthB    = 8 << 30 // bytes at most, as netio-perf's budget
)

// msgConn reads and writes length-prefixed messages on one connection.
type msgConn struct {
	conn net.Conn
	r    io.Reader
	bw   *bufio.Writer // nil: plain
	hdr  [lenPrefix]byte
}

func newMsgConn(conn net.Conn, buffered bool) *msgConn {
	m := &msgConn{conn: conn, r: conn}
	if buffered {
		m.r = bufio.NewReaderSize(conn, bufioSize)
		m.bw = bufio.NewWriterSize(conn, bufioSize)
	}
	return m
}

// newFrame returns a message of size payload bytes with its length prefix.
func newFrame(size int) []byte {
	f := make([]byte, lenPrefix+size)
	binary.LittleEndian.PutUint32(f, uint32(size))
	return f
}

// send writes one frame (prefix and payload).
func (m *msgConn) send(frame []byte) error {
	var err error
	if m.bw != nil {
		_, err = m.bw.Write(frame)
	} else {
		_, err = m.conn.Write(frame)
	}
	return err
}

// flush sends what the bufio writer holds.
func (m *msgConn) flush() error {
	if m.bw == nil {
		return nil
	}
	return m.bw.Flush()
}

// receive reads one message into frame[lenPrefix:] and sets frame's prefix,
// so that frame[:lenPrefix+n] can be sent back as it is. It returns the
// payload length, or io.EOF when the peer closed between messages.
func (m *msgConn) receive(frame []byte) (int, error) {
	if _, err := io.ReadFull(m.r, m.hdr[:]); err != nil {
		return 0, err
	}
	n := int(binary.LittleEndian.Uint32(m.hdr[:]))
	if n > len(frame)-lenPrefix {
		return 0, fmt.Errorf("message of %d bytes, buffer of %d", n, len(frame)-lenPrefix)
	}
	copy(frame, m.hdr[:])
	if _, err := io.ReadFull(m.r, frame[lenPrefix:lenPrefix+n]); err != nil {
		return 0, fmt.Errorf("payload: %w", err)
	}
	return n, nil
}

// overTCP connects a client to a server over loopback TCP, runs serve on
// the server's end in a goroutine and client on the client's end, then
// closes the client's sending side (serve reads io.EOF and returns) and
// waits for serve. Every end has a deadline of limit, so nothing waits
// forever. It returns the first error.
func overTCP(ctx context.Context, buffered bool, limit time.Duration, serve, client func(*msgConn) error) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	_ = c.SetDeadline(deadline)
	_ = sc.SetDeadline(deadline)
	served := make(chan error, 1)
	go func() {
		defer sc.Close()
		served <- serve(newMsgConn(sc, buffered))
	}()
	err = client(newMsgConn(c, buffered))
	_ = c.(*net.TCPConn).CloseWrite()
	if serr := <-served; err == nil && serr != nil {
		err = fmt.Errorf("server: %w", serr)
	}
	return err
}

// tcpBandwidth streams messages of size bytes for d (or the budget's count)
// and counts them at the receiver, timed from the first write to the last
// message read, with this process's CPU time over the same span.
func tcpBandwidth(ctx context.Context, size int, buffered bool, d time.Duration) (sample, error) {
	s := sample{Impl: tcpImpl(buffered), Mode: modeBandwidth, Size: size}
	var sent, received uint64
	var start, last time.Time
	var cpu0 time.Duration
	err := overTCP(ctx, buffered, d+tcpSlack,
		func(m *msgConn) (err error) {
			received, _, last, err = drainMessages(m, size)
			return err
		},
		func(m *msgConn) (err error) {
			cpu0, start = cpuTime(), time.Now()
			sent, err = stream(m, size, start.Add(d), min(uint64(maxBandwidthN), uint64(maxBandwidthB/size)))
			return err
		})
	cpu := cpuTime() - cpu0
	if err != nil {
		return s, err
	}
	if received != sent {
		return s, fmt.Errorf("sent %d messages, received %d", sent, received)
	}
	elapsed := last.Sub(start).Seconds()
	s.Messages, s.Seconds = received, elapsed
	bytes := float64(received) * float64(size)
	if elapsed > 0 {
		s.MBPerS, s.MsgsPerS = bytes/1e6/elapsed, float64(received)/elapsed
	}
	s.CPUSecPerGB = cpu.Seconds() / (bytes / 1e9)
	return s, nil
}

// stream sends messages of size bytes until the deadline or limit
// messages, flushes, and returns how many it sent.
func stream(m *msgConn, size int, deadline time.Time, limit uint64) (uint64, error) {
	frame := newFrame(size)
	var sent uint64
	for sent < limit && (sent%checkClockAt != 0 || time.Now().Before(deadline)) {
		if err := m.send(frame); err != nil {
			return sent, fmt.Errorf("message %d: %w", sent, err)
		}
		sent++
	}
	return sent, m.flush()
}

// drainMessages reads messages of size bytes until the peer closes, and
// returns how many arrived and when the first and the last one did.
func drainMessages(m *msgConn, size int) (n uint64, first, last time.Time, err error) {
	frame := newFrame(size)
	for {
		got, err := m.receive(frame)
		if errors.Is(err, io.EOF) {
			return n, first, last, nil
		}
		if err != nil {
			return n, first, last, err
		}
		if got != size {
			return n, first, last, fmt.Errorf("message %d: %d bytes, want %d", n, got, size)
		}
		n++
		last = time.Now()
		if n == 1 {
			first = last
		}
	}
}

// tcpPingPong bounces one message of size bytes until d passed (and
// pingPongMinTimed round trips were timed) or pingPongMax were timed, and
// reports the one-way latency (half the round trip) at the 50th and 99th
// percentile.
func tcpPingPong(ctx context.Context, size int, buffered bool, d time.Duration) (sample, error) {
	s := sample{Impl: tcpImpl(buffered), Mode: modePingPong, Size: size}
	var rtts []time.Duration
	err := overTCP(ctx, buffered, d+tcpSlack,
		func(m *msgConn) error { return echo(m, size) },
		func(m *msgConn) (err error) {
			rtts, err = bounce(m, size, d, pingPongMax)
			return err
		})
	if err != nil {
		return s, err
	}
	slices.Sort(rtts)
	s.RoundTrips = len(rtts)
	s.LatP50us, s.LatP99us = oneWayMicros(rtts, 0.50), oneWayMicros(rtts, 0.99)
	return s, nil
}

// echo sends every message back until the peer closes.
func echo(m *msgConn, size int) error {
	frame := newFrame(size)
	for {
		n, err := m.receive(frame)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := m.send(frame[:lenPrefix+n]); err != nil {
			return err
		}
		if err := m.flush(); err != nil {
			return err
		}
	}
}

// bounce sends a message, waits for it to come back, and repeats until d
// passed (and pingPongMinTimed round trips were timed) or most were timed;
// it returns the round trips after the warm-up.
func bounce(m *msgConn, size int, d time.Duration, most int) ([]time.Duration, error) {
	frame, back := newFrame(size), newFrame(size)
	rtts := make([]time.Duration, 0, most)
	deadline := time.Now().Add(d)
	for trip := 0; len(rtts) < most; trip++ {
		t0 := time.Now()
		if err := m.send(frame); err != nil {
			return nil, err
		}
		if err := m.flush(); err != nil {
			return nil, err
		}
		if _, err := m.receive(back); err != nil {
			return nil, fmt.Errorf("round trip %d: %w", trip, err)
		}
		now := time.Now()
		if trip >= pingPongWarm {
			rtts = append(rtts, now.Sub(t0))
		}
		if now.After(deadline) && len(rtts) >= pingPongMinTimed {
			break
		}
	}
	return rtts, nil
}

// oneWayMicros returns half the q-quantile of sorted round trips, in µs,
// picked as netio-perf and the C baseline pick it.
func oneWayMicros(sorted []time.Duration, q float64) float64 {
	return latency.OneWayQuantile(sorted, q)
}

func tcpImpl(buffered bool) string {
	if buffered {
		return implBufio
	}
	return implTCP
}

// cpuTime returns the CPU time (user + system, every thread) this process
// has used so far, or 0 if the kernel does not say.
func cpuTime() time.Duration {
	d, _ := cputime.Process()
	return d
}
