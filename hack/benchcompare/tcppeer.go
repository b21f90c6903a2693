package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/netio-go/netio/internal/latency"
)

// The Go TCP contender between two processes: benchcompare runs itself as
// "tcp-server" and "tcp-client" (plain net.TCPConn, the length-prefixed
// messages of tcp.go).
//
//	benchcompare tcp-server --mode bw|pingpong --size S [--timeout D]
//	benchcompare tcp-client --mode bw|pingpong --size S --count N --connect IP:PORT [--timeout D]
//
// The server listens on 127.0.0.1 (a free port), prints "LISTENING
// ip:port", takes one connection and drains it (bw: counted and timed from
// the first message to the last) or echoes every message (pingpong) until
// the client closes, then prints its JSON line. The client streams --count
// messages, or bounces --count timed round trips (after pingPongWarm
// untimed ones) and prints one-way latencies. The JSON lines carry
// perfRow's field names.

// Roles of the two-process Go TCP contender.
const (
	roleTCPServer = "tcp-server"
	roleTCPClient = "tcp-client"
)

// tcpPeerConfig is a tcp-server or tcp-client command line.
type tcpPeerConfig struct {
	role    string
	mode    string
	size    int
	count   int
	connect string
	timeout time.Duration
}

// parseTCPPeer parses the command line of role.
func parseTCPPeer(role string, args []string, stderr io.Writer) (tcpPeerConfig, error) {
	c := tcpPeerConfig{role: role}
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.mode, "mode", modeBandwidth, "bandwidth or pingpong")
	size := fs.String("size", "", "message size, e.g. 64, 4K, 1M")
	fs.IntVar(&c.count, "count", 0, "client: messages (bandwidth) or timed round trips (pingpong)")
	fs.StringVar(&c.connect, "connect", "", "client: the server's IP:PORT")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "deadline of the connection")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.size, err = parseSize(*size); err != nil {
		return c, fmt.Errorf("--size: %w", err)
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.mode != modeBandwidth && c.mode != modePingPong:
		return c, fmt.Errorf("--mode %q: want %s or %s", c.mode, modeBandwidth, modePingPong)
	case c.timeout <= 0:
		return c, errors.New("--timeout: want a positive duration")
	case role == roleTCPClient && (c.count < 1 || c.count > 1<<30):
		return c, errors.New("--count: want 1..2^30")
	case role == roleTCPClient && c.connect == "":
		return c, errors.New("--connect is required")
	}
	return c, nil
}

// runTCPPeer runs one side and returns the exit status: 0, 1 on a failure,
// 2 on a usage error.
func runTCPPeer(ctx context.Context, role string, args []string, stdout, stderr io.Writer) int {
	c, err := parseTCPPeer(role, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchcompare %s: %v\n", role, err)
		return 2
	}
	var row perfRow
	if role == roleTCPServer {
		row, err = c.serve(ctx, stdout)
	} else {
		row, err = c.dial(ctx)
	}
	if err == nil {
		err = printJSONLine(stdout, row)
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchcompare %s: %v\n", role, err)
		return 1
	}
	return 0
}

// serve listens, says where, and serves one connection.
func (c tcpPeerConfig) serve(ctx context.Context, stdout io.Writer) (perfRow, error) {
	row := perfRow{Size: c.size}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return row, err
	}
	defer ln.Close()
	if _, err := fmt.Fprintf(stdout, "LISTENING %s\n", ln.Addr()); err != nil {
		return row, err
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(c.timeout))
	conn, err := ln.Accept()
	if err != nil {
		return row, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.timeout))
	m := newMsgConn(conn, false)
	if c.mode == modePingPong {
		return row, echo(m, c.size)
	}
	n, first, last, err := drainMessages(m, c.size)
	row.Messages = n
	if elapsed := last.Sub(first); n > 1 && elapsed > 0 {
		row.Seconds = elapsed.Seconds()
		row.MsgsPerS = float64(n) / row.Seconds
		row.MBPerS = row.MsgsPerS * float64(c.size) / 1e6
	}
	return row, err
}

// dial connects and streams or bounces.
func (c tcpPeerConfig) dial(ctx context.Context) (perfRow, error) {
	row := perfRow{Size: c.size}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.connect)
	if err != nil {
		return row, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.timeout))
	m := newMsgConn(conn, false)
	if c.mode == modeBandwidth {
		start := time.Now()
		row.Messages, err = stream(m, c.size, start.Add(c.timeout), uint64(c.count))
		row.Seconds = time.Since(start).Seconds()
		return row, err
	}
	rtts, err := bounce(m, c.size, c.timeout, c.count)
	if err != nil {
		return row, err
	}
	row.RoundTrips, row.LatMeanus = len(rtts), latency.OneWayMean(rtts)
	slices.Sort(rtts)
	row.LatP50us, row.LatP99us = oneWayMicros(rtts, 0.50), oneWayMicros(rtts, 0.99)
	return row, nil
}
