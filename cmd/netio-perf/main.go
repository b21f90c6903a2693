// Command netio-perf measures netio-go over libfabric, in the style of
// fabtests.
//
// Without a subcommand it runs a loopback sweep in one process: for each
// message size (64 B to 1 MiB) a throughput part, messages streamed through
// a window of buffers and counted at the receiver, and a ping-pong part,
// one message bounced over two connections (one each way) with the one-way
// latency taken as half the round trip. It prints a table, then the CPU
// time (getrusage user+sys of the process, both sides) per GB each
// throughput part took, or one JSON object with --json. --plot also draws
// bandwidth and one-way latency against message size into an SVG or PNG
// file (--mode send, rma-read, rma-write).
//
//	netio-perf [--provider P] [--mode send|rma-read|rma-write|scale] [--sizes LIST]
//	           [--duration D] [--window N] [--rx-bufs N] [--quick] [--zero-copy] [--json]
//	           [--plot FILE.svg|FILE.png]
//	netio-perf --mode scale [--conns 1,4,16,64] [--sizes 4K] [--duration D] [--json]
//	netio-perf --mode coalesce [--sizes 64] [--buf-size 64K] [--flush-interval 1ms]
//	           [--duration D] [--window N] [--rx-bufs N] [--verify] [--json]
//
// --duration bounds each throughput part and each ping-pong; --window and
// --rx-bufs set the send buffers in flight and the receive buffers posted
// per connection. --mode scale measures throughput with each --conns count
// of connections into one receiver (the senders share one poller, each
// connection gets a share of about 2048 messages in flight) and the CPU
// seconds per GB moved. --mode coalesce measures small-message coalescing:
// one goroutine calls SendMessage as fast as the endpoint takes messages
// (waiting for a completion when every buffer is in flight) into a listener
// that decodes them with OnMessage, and the messages are counted there, end
// to end; --window counts the coalescing buffers of --buf-size bytes. It
// prints msgs/s, MB/s, CPU s/GB and how many buffers were sent and why
// (full, flush interval passed, final Flush). With --verify message k
// carries tag k and the pattern below, and the receiver checks both.
//
// The server and client modes run on their own, against each other or
// against any plain libfabric peer: the wire carries exactly the
// application's bytes.
//
//	netio-perf server [--provider P] [--mode send|pingpong] [--listen IP:PORT] [--buf-size B] [--bufs N]
//	                  [--count N] [--verify] [--coalesce] [--json] [--timeout D]
//	netio-perf client [--provider P] [--mode send|pingpong] --connect IP:PORT [--size S] [--count N]
//	                  [--bufs N] [--verify] [--json] [--timeout D] [--local IP]
//	                  [--coalesce [--buf-size 64K] [--flush-interval 1ms]]
//
// When stdout is a terminal and --json is off, the server and the client
// print a progress line every --progress-interval (1s): messages so far,
// MB/s and Mmsg/s over the last interval, and the sends in flight (client)
// or the connections open (server); --progress on|off overrides.
//
// The server prints "LISTENING ip:port" as its first line on stdout, then
// receives from any number of connections until --count messages arrived
// or SIGINT/SIGTERM. With --verify byte i of message k (k counted from 0 on
// each connection) is (k + i) % 251 (package internal/testpattern, stream 0,
// no header): the client fills it, the server counts the messages that
// differ. With --coalesce on both sides the client packs
// its messages (64 B unless --size says otherwise) into coalescing buffers
// with SendMessage (with --verify message k has tag k), and the server
// decodes them with OnMessage and counts (and verifies) messages, not
// buffers; the server's --buf-size must hold the client's. With --json the
// last line on stdout is one JSON object (role, provider, messages, bytes,
// seconds, mb_per_s, msgs_per_s, verify_errors, ...; MB = 10^6 bytes).
// --window and --iterations are fabtests' names for --bufs and --count.
//
// With --mode pingpong on both sides they measure latency the way fabtests'
// fi_msg_pingpong does: the client bounces one --size message off the
// server --count times (after 10 untimed warm-up round trips) and prints
// the one-way latency (half the round trip) as p50, p99 and mean, with
// --json as latency_p50_us, latency_p99_us and latency_mean_us. Like
// fi_msg_pingpong they use one connection both ways (endpoint.DialReplies
// and ListenReplies): the client's first message is a hello naming its
// ping size, the server answers it on the same connection, serves that one
// client and exits when it leaves; a server that refuses the client (pings
// larger than its --buf-size) closes the connection and both exit with the
// reason. --poll busy-locked is the lowest-latency poller setting when
// GOMAXPROCS exceeds the pollers.
//
// The publish and subscribe modes measure publish/subscribe by tag
// (package pubsub) between processes or hosts:
//
//	netio-perf publish [--provider P] [--listen IP:PORT] [--tags N] [--tag-base T]
//	                   [--first-seq Q] [--size S] [--count N] [--duration D] [--rate R]
//	                   [--policy block|drop] [--immediate|--shared] [--buf-size B] [--bufs N]
//	                   [--flush-interval D] [--subscribers K] [--until-unsubscribed]
//	                   [--verify] [--log] [--json] [--timeout D]
//	netio-perf subscribe [--provider P] --connect IP:PORT --tags LIST [--count N]
//	                     [--policy block|drop] [--buf-size B] [--bufs N] [--verify]
//	                     [--log] [--json] [--timeout D] [--local IP]
//	                     [--stall-after N [--stall D]] [--churn N]
//
// The publisher prints "LISTENING ip:port" (its subscription port) first,
// serves tags T..T+N-1 (T is --tag-base, 0 by default), waits for --subscribers subscribers, publishes
// --count messages round robin over its tags (at --rate messages/s, or as
// fast as its subscribers take them), waits for its subscribers to leave,
// and reports what it published and, per subscriber, the copies delivered
// and dropped. A subscriber subscribes to --tags (e.g. 0,3,10-19), receives
// until --count messages were delivered or reported missing, and reports
// messages, gaps and missed messages. With --verify message k of a tag
// carries k and the tag, then bytes (k+i)%256, and the subscriber checks
// them against the sequence number it counted. --mode pubsub in the sweep
// measures one publisher and --conns subscribers (default 1,4) in one
// process, 64 B to 4 KiB.
//
// For the tests across hosts: --stall-after N blocks the subscriber's
// callback for --stall (2 s) once, after N messages, so that a Drop
// publisher drops its copies; --churn N makes N subscribe/unsubscribe
// operations on random pairs of --tags, unsubscribes everything and
// reports whether goroutines and registrations came back to their
// baseline; publish --until-unsubscribed stops once every subscriber has
// left and reports the same of the publisher.
//
// Every mode takes --log-level LEVEL (a zerolog level: trace, debug, info,
// warn, error; the default, disabled, logs nothing): the logger netio-perf
// gives the library (domain.Config.Logger, and the publisher's and the
// subscriber's) writes from that level on to stderr.
//
// With --endpoint rdm (the default is msg) the sweep, server and client
// use connectionless endpoints (package rdm) instead of connections, on
// tcp;ofi_rxm unless --provider says udp;ofi_rxd, sockets or shm. The
// sweep's throughput part streams between two endpoints of one domain,
// which share its one poller (on shm both set rdm.Config.ShareProcess and
// are closed only after everything sent arrived, or left open after a
// failure); its ping-pong puts the echoing endpoint in a
// second domain, so that each side has a poller thread. The server's one
// endpoint receives from any number of clients; it prints "LISTENING
// ADDR", where ADDR is IP:PORT, or for shm the name --connect takes
// (--listen NAME chooses it, by default the provider makes one). With
// --verify it checks every message against the pattern of the message its
// first byte names, and the counts of all senders together against
// streams that each start at message 0, since it can tell neither the
// senders apart nor their order (testpattern.Unordered). client --inject
// sends each message with rdm.Endpoint.Inject instead of a send buffer.
//
// Exit status: 0 on success, 1 on a runtime failure (connection refused,
// timeout, failed sends, verification errors), 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches on the subcommand and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	mode := "sweep"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		mode, args = args[0], args[1:]
	}
	var err error
	switch mode {
	case "sweep":
		var o sweepOptions
		if o, err = parseSweepFlags(args, stderr); err == nil {
			err = runSweep(ctx, o, stdout, stderr)
		}
	case "server":
		var o serverOptions
		if o, err = parseServerFlags(args, stderr); err == nil {
			err = runServer(ctx, o, stdout, stderr)
		}
	case "client":
		var o clientOptions
		if o, err = parseClientFlags(args, stderr); err == nil {
			err = runClient(ctx, o, stdout, stderr)
		}
	case "publish":
		var o publishOptions
		if o, err = parsePublishFlags(args, stderr); err == nil {
			err = runPublish(ctx, o, stdout, stderr)
		}
	case "subscribe":
		var o subscribeOptions
		if o, err = parseSubscribeFlags(args, stderr); err == nil {
			err = runSubscribe(ctx, o, stdout, stderr)
		}
	case "help":
		printSynopses(stderr)
		err = flag.ErrHelp
	default:
		fmt.Fprintf(stderr, "netio-perf: unknown command %q\n", mode)
		printSynopses(stderr)
		err = errUsage
	}
	return exitCode(err, stderr, mode)
}

// printSynopses prints the synopsis of every mode.
func printSynopses(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n       %s\n       %s\n       %s\n       %s\n(-h after a command lists its flags)\n",
		sweepSynopsis, serverSynopsis, clientSynopsis, publishSynopsis, subscribeSynopsis)
}

// exitCode prints a runtime error and maps err to the exit status.
func exitCode(err error, stderr io.Writer, mode string) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage // the error and the usage are printed already
	default:
		fmt.Fprintf(stderr, "netio-perf %s: %v\n", mode, err)
		return exitFail
	}
}
