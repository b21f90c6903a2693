// Command deadpeer measures what a connectionless endpoint costs while it
// waits for a peer whose process died: its sends, refused by the provider
// for now (ofi_rxm connects again on each post), wait parked until
// Config.PeerTimeout fails them.
//
//	go run ./hack/deadpeer [--provider 'tcp;ofi_rxm'] [--timeout 5s] [--sends 4]
//
// It starts a receiver as a child process (itself, --role rx), sends it one
// message so that the provider has connected, kills it with SIGKILL and
// waits for it to exit, then sends --sends messages to it and waits for
// their reports. It prints one JSON line: the time from the sends to the
// last report (PeerTimeout, and how late the lane failed), this process's
// CPU time in that window and in an idle window of the same length just
// before it, after the kill (the poller alone), and in one before the kill,
// and the voluntary context switches of each. Run it
// under `strace -f -c -e trace=connect` or `perf stat -e
// syscalls:sys_enter_connect` to count the connection attempts (the one
// before the kill included). Bounded: the child is killed, every wait has
// a deadline of --timeout plus 30 s.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/internal/cputime"
	"github.com/netio-go/netio/rdm"
)

// report is the JSON line printed.
type report struct {
	Provider    string  `json:"provider"`
	PeerTimeout string  `json:"peer_timeout"`
	Sends       int     `json:"sends"`
	Failed      int     `json:"failed"`
	FailAfterMs float64 `json:"fail_after_ms"` // sends to the last report
	LateMs      float64 `json:"late_ms"`       // FailAfterMs past PeerTimeout
	CPUDeadMs   float64 `json:"cpu_dead_ms"`   // CPU while the sends waited
	CPUIdleMs   float64 `json:"cpu_idle_ms"`   // idle as long, after the kill
	CPULiveMs   float64 `json:"cpu_live_ms"`   // idle as long, before the kill
	SwitchDead  int64   `json:"switches_dead"` // voluntary context switches
	SwitchIdle  int64   `json:"switches_idle"`
	SwitchLive  int64   `json:"switches_live"`
}

func main() {
	role := flag.String("role", "tx", "tx, or rx (the child)")
	provider := flag.String("provider", "tcp;ofi_rxm", "libfabric RDM provider")
	timeout := flag.Duration("timeout", rdm.DefaultPeerTimeout, "rdm.Config.PeerTimeout")
	sends := flag.Int("sends", 4, "messages sent to the dead peer")
	flag.Parse()
	var err error
	if *role == "rx" {
		err = receive(*provider)
	} else {
		err = measure(*provider, *timeout, *sends)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deadpeer:", err)
		os.Exit(1)
	}
}

func open(provider string) (*domain.Manager, error) {
	return domain.Open(domain.Config{Provider: provider, Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
}

// receive is the child: it prints its address and waits to be killed.
func receive(provider string) error {
	mgr, err := open(provider)
	if err != nil {
		return err
	}
	rx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {}})
	if err != nil {
		return err
	}
	fmt.Println(rx.Addr())
	time.Sleep(2 * time.Minute) // killed long before
	return errors.New("not killed")
}

// startChild starts the receiver and returns it and its address.
func startChild(provider string) (*exec.Cmd, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "--role", "rx", "--provider", provider)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("the receiver's address: %w", err)
	}
	return cmd, line[:len(line)-1], nil
}

func measure(provider string, timeout time.Duration, sends int) error {
	child, addr, err := startChild(provider)
	if err != nil {
		return err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	mgr, err := open(provider)
	if err != nil {
		return err
	}
	defer mgr.Close()
	done := make(chan netio.Status, sends+1)
	tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{PeerTimeout: timeout,
		OnData:          func(*rdm.Endpoint, rdm.Peer, []byte) {},
		OnSendCompleted: func(_ uint64, st netio.Status) { done <- st }})
	if err != nil {
		return err
	}
	defer tx.Close()
	peer, err := tx.AddPeer(addr)
	if err != nil {
		return err
	}
	wait := timeout + 30*time.Second
	if err := send(tx, peer); err != nil {
		return err
	}
	if st, err := next(done, wait); err != nil || st != netio.OK {
		return fmt.Errorf("the first send, to the live receiver: %v %w", st, err)
	}
	r := report{Provider: provider, PeerTimeout: timeout.String(), Sends: sends}
	r.CPULiveMs, r.SwitchLive = idle(timeout)
	if err := child.Process.Kill(); err != nil {
		return err
	}
	_ = child.Wait()
	r.CPUIdleMs, r.SwitchIdle = idle(timeout)
	cpu1, sw1 := usage()
	start := time.Now()
	for range sends {
		if err := send(tx, peer); err != nil {
			return err
		}
	}
	for range sends {
		st, err := next(done, wait)
		if err != nil {
			return err
		}
		if st != netio.OK {
			r.Failed++
		}
	}
	elapsed := time.Since(start)
	cpu2, sw2 := usage()
	r.FailAfterMs, r.LateMs = ms(elapsed), ms(elapsed-timeout)
	r.CPUDeadMs, r.SwitchDead = ms(cpu2-cpu1), sw2-sw1
	return json.NewEncoder(os.Stdout).Encode(r)
}

// send sends 8 bytes to peer, retrying while no buffer is free.
func send(tx *rdm.Endpoint, peer rdm.Peer) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if buf := tx.GetBuffer(); buf != nil {
			if st := tx.SendBuffer(buf, 8, peer); st != netio.OK {
				tx.ReleaseBuffer(buf.ID())
				if st != netio.NoResources {
					return fmt.Errorf("send: %v", st)
				}
			} else {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("send: no room for 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func next(done <-chan netio.Status, wait time.Duration) (netio.Status, error) {
	select {
	case st := <-done:
		return st, nil
	case <-time.After(wait):
		return 0, errors.New("no report")
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
