// Command retrycost measures what a sender costs while a retry of its
// waits for a peer that takes nothing, in one of two shapes (--shape):
//
//	go run ./hack/retrycost --shape deadpeer [--provider 'tcp;ofi_rxm'] [--timeout 5s] [--sends 4] [--live]
//	go run ./hack/retrycost --shape handoff [--timeout 2s]
//
// deadpeer: an rdm endpoint's sends to a peer whose process died, parked
// and retried until Config.PeerTimeout (--timeout) fails them (ofi_rxm
// connects again on each post; see deadpeer.go). handoff: a connected
// tcp sender's hand-off queue stalled at the inject bound behind a large
// send while its receiver stopped reading, for --timeout (handoff.go).
//
// It prints one JSON line: this process's CPU time (ms) and voluntary
// context switches while the retry waited, and in an idle window as long
// just before it with nothing waiting, and what the shape adds. Run it
// under `perf stat -e syscalls:sys_enter_connect` (deadpeer) to count the
// connection attempts; hack/retrycost-ab.sh compares two builds. Bounded:
// every wait has a deadline, the child process is killed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/netio-go/netio/internal/cputime"
	"github.com/netio-go/netio/rdm"
)

// report is the JSON line printed.
type report struct {
	Shape      string  `json:"shape"`
	Provider   string  `json:"provider"`
	Window     string  `json:"window"`      // --timeout
	CPUWaitMs  float64 `json:"cpu_wait_ms"` // CPU while the retry waited
	CPUIdleMs  float64 `json:"cpu_idle_ms"` // idle as long, just before
	SwitchWait int64   `json:"switches_wait"`
	SwitchIdle int64   `json:"switches_idle"`
	// deadpeer
	Sends       int      `json:"sends,omitempty"`
	Failed      int      `json:"failed,omitempty"`
	FailAfterMs float64  `json:"fail_after_ms,omitempty"` // sends to the last report
	LateMs      *float64 `json:"late_ms,omitempty"`       // FailAfterMs past PeerTimeout
	CPULiveMs   float64  `json:"cpu_live_ms,omitempty"`   // idle as long, before the kill
	LiveSent    uint64   `json:"live_sent,omitempty"`     // --live: messages streamed to the live peer
	// handoff
	Tries int `json:"tries,omitempty"` // large+small pairs sent until the small one queued
}

func main() {
	shape := flag.String("shape", "deadpeer", "deadpeer or handoff; rx is the deadpeer child")
	provider := flag.String("provider", "tcp;ofi_rxm", "libfabric RDM provider (deadpeer)")
	timeout := flag.Duration("timeout", rdm.DefaultPeerTimeout, "deadpeer: rdm.Config.PeerTimeout; handoff: how long the stall lasts")
	sends := flag.Int("sends", 4, "deadpeer: messages sent to the dead peer")
	live := flag.Bool("live", false, "deadpeer: stream to a live peer meanwhile")
	flag.Parse()
	var (
		r   report
		err error
	)
	switch *shape {
	case "rx":
		err = receive(*provider)
	case "deadpeer":
		r, err = deadPeer(*provider, *timeout, *sends, *live)
	case "handoff":
		r, err = stalledHandOff(*timeout)
	default:
		err = fmt.Errorf("--shape %q: deadpeer or handoff", *shape)
	}
	if err == nil && *shape != "rx" {
		r.Shape, r.Window = *shape, timeout.String()
		err = json.NewEncoder(os.Stdout).Encode(r)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "retrycost:", err)
		os.Exit(1)
	}
}

// idle sleeps for d and returns the CPU time (ms) and voluntary context
// switches of this process meanwhile.
func idle(d time.Duration) (float64, int64) {
	cpu0, sw0 := usage()
	time.Sleep(d)
	cpu1, sw1 := usage()
	return ms(cpu1 - cpu0), sw1 - sw0
}

// usage returns this process's CPU time and voluntary context switches.
func usage() (time.Duration, int64) {
	cpu, _ := cputime.Process()
	v, _, _ := cputime.Switches()
	return cpu, v
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
