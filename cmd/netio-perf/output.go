package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// report is the outcome of a server or client run. Its JSON form is the
// last line printed with --json; the field names match the C peer's
// (tests/cpeer), so scripts can compare the two. MB are 10^6 bytes.
type report struct {
	Role          string  `json:"role"`
	Provider      string  `json:"provider"`
	Size          int     `json:"size,omitempty"`
	Connections   uint64  `json:"connections,omitempty"`
	Messages      uint64  `json:"messages"`
	Bytes         uint64  `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	MBPerS        float64 `json:"mb_per_s"`
	MsgsPerS      float64 `json:"msgs_per_s"`
	Verify        bool    `json:"verify"`
	VerifyErrors  uint64  `json:"verify_errors"`
	ReceiveErrors uint64  `json:"receive_errors,omitempty"`
	FailedSends   uint64  `json:"failed_sends,omitempty"`
	Buffers       uint64  `json:"buffers,omitempty"` // client --coalesce: coalesced buffers sent
}

// setRates fills Seconds, MBPerS and MsgsPerS from the counters and the
// elapsed time. A zero elapsed time gives zero rates, never Inf or NaN
// (which JSON cannot carry).
func (r *report) setRates(elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	r.MBPerS, r.MsgsPerS = rates(r.Messages, r.Bytes, elapsed)
}

// rates returns MB/s (10^6 bytes) and messages/s, or zeros for a zero
// elapsed time.
func rates(messages, bytes uint64, elapsed time.Duration) (mbPerS, msgsPerS float64) {
	s := elapsed.Seconds()
	if s <= 0 {
		return 0, 0
	}
	return float64(bytes) / 1e6 / s, float64(messages) / s
}

// print writes the report as one JSON line, or as a human-readable summary.
func (r report) print(w io.Writer, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	verify := "off"
	if r.Verify {
		verify = fmt.Sprintf("%d errors", r.VerifyErrors)
	}
	_, err := fmt.Fprintf(w, "%s (%s): %d messages, %.3f MB in %.3f s: %.1f MB/s, %.4f Mmsg/s, verify %s",
		r.Role, r.Provider, r.Messages, float64(r.Bytes)/1e6, r.Seconds, r.MBPerS, r.MsgsPerS/1e6, verify)
	if err != nil {
		return err
	}
	if r.Connections > 0 {
		fmt.Fprintf(w, ", %d connections", r.Connections)
	}
	if r.ReceiveErrors > 0 {
		fmt.Fprintf(w, ", %d receive errors", r.ReceiveErrors)
	}
	if r.Buffers > 0 {
		fmt.Fprintf(w, ", %d coalesced buffers", r.Buffers)
	}
	if r.FailedSends > 0 {
		fmt.Fprintf(w, ", %d failed sends", r.FailedSends)
	}
	_, err = fmt.Fprintln(w)
	return err
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// sweepRow is one message size of the loopback sweep, or with --mode scale
// one connection count. The CPU fields cover the throughput part: user +
// system time of the whole process (sender and receiver), and that per GB
// (10^9 bytes) moved. With --mode coalesce, Messages are those counted at
// the receiver's OnMessage, Window counts coalescing buffers, and the
// fields after LatP99us say how the messages were packed.
type sweepRow struct {
	Size        int     `json:"size"`
	Connections int     `json:"connections,omitempty"`
	Window      int     `json:"window,omitempty"`
	RxBufs      int     `json:"rx_bufs,omitempty"`
	Messages    uint64  `json:"messages"`
	Bytes       uint64  `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	MBPerS      float64 `json:"mb_per_s"`
	MsgsPerS    float64 `json:"msgs_per_s"`
	CPUSeconds  float64 `json:"cpu_seconds"`
	CPUSecPerGB float64 `json:"cpu_s_per_gb"`
	RoundTrips  int     `json:"round_trips"`
	LatP50us    float64 `json:"latency_p50_us"`
	LatP99us    float64 `json:"latency_p99_us"`

	BufSize         int     `json:"buf_size,omitempty"`          // bytes per coalescing buffer
	FlushIntervalUs float64 `json:"flush_interval_us,omitempty"` // coalescing flush interval
	Sent            uint64  `json:"sent,omitempty"`              // messages SendMessage took
	Buffers         uint64  `json:"buffers,omitempty"`           // coalesced buffers sent: the flushes below
	FullFlushes     uint64  `json:"full_flushes,omitempty"`      // ... because the next message did not fit
	IntervalFlushes uint64  `json:"interval_flushes,omitempty"`  // ... because the flush interval passed
	ExplicitFlushes uint64  `json:"explicit_flushes,omitempty"`  // ... by Flush, at the end
	Verify          bool    `json:"verify,omitempty"`            // tags and payloads were checked (any error fails the run)
}

// sweepReport is the JSON form of a sweep.
type sweepReport struct {
	Role     string     `json:"role"`
	Provider string     `json:"provider"`
	Mode     string     `json:"mode"`
	Rows     []sweepRow `json:"rows"`
}

// printTable writes the sweep as an aligned table, then the CPU cost of each
// throughput part. The CPU figures get a table of their own so that the
// main table keeps the columns scripts parse.
func printTable(w io.Writer, provider, mode string, rows []sweepRow) error {
	latency := "latency is one-way = RTT/2"
	if mode != modeSend {
		latency = "latency is one whole " + mode + " operation"
	}
	fmt.Fprintf(w, "netio-perf loopback sweep, provider %s, mode %s (MB = 10^6 bytes; %s)\n", provider, mode, latency)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tmessages\tMB/s\tMmsg/s\tround trips\tlat p50 µs\tlat p99 µs\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.4f\t%d\t%.1f\t%.1f\t\n",
			formatSize(r.Size), r.Messages, r.MBPerS, r.MsgsPerS/1e6, r.RoundTrips, r.LatP50us, r.LatP99us)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nCPU of the throughput parts (user+sys of this process, sender and receiver; GB = 10^9 bytes)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tCPU s\tCPU s/GB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t\n", formatSize(r.Size), r.CPUSeconds, r.CPUSecPerGB)
	}
	return tw.Flush()
}

// printScaleTable writes the rows of --mode scale.
func printScaleTable(w io.Writer, provider string, rows []sweepRow) error {
	fmt.Fprintf(w, "netio-perf scaling, provider %s: N connections into one receiver (MB = 10^6 bytes; CPU = user+sys of this process, GB = 10^9 bytes)\n", provider)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conns\tsize\twindow\tmessages\tMB/s\tMmsg/s\tCPU s/GB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.1f\t%.4f\t%.3f\t\n",
			r.Connections, formatSize(r.Size), r.Window, r.Messages, r.MBPerS, r.MsgsPerS/1e6, r.CPUSecPerGB)
	}
	return tw.Flush()
}

// printCoalesceTable writes the rows of --mode coalesce: the rates counted
// at the receiver's callback, the CPU they cost, and how the messages were
// packed into buffers.
func printCoalesceTable(w io.Writer, provider string, rows []sweepRow) error {
	fmt.Fprintf(w, "netio-perf coalesced messages, provider %s: SendMessage to the receiver's OnMessage (MB = 10^6 bytes; CPU = user+sys of this process, GB = 10^9 bytes)\n", provider)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tbuffer\tmessages\tMB/s\tMmsg/s\tCPU s/GB\tCPU ns/msg\tbuffers\tmsgs/buffer\tfull\tinterval\texplicit\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.3f\t%.3f\t%.1f\t%d\t%.1f\t%d\t%d\t%d\t\n",
			formatSize(r.Size), formatSize(r.BufSize), r.Messages, r.MBPerS, r.MsgsPerS/1e6, r.CPUSecPerGB,
			perMessage(r.CPUSeconds*1e9, r.Messages), r.Buffers, perMessage(float64(r.Sent), r.Buffers),
			r.FullFlushes, r.IntervalFlushes, r.ExplicitFlushes)
	}
	return tw.Flush()
}

// perMessage returns v/n, or 0 for n == 0.
func perMessage(v float64, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return v / float64(n)
}
