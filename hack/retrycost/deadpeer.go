package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/rdm"
)

// The deadpeer shape: a receiver child process (this program, --shape rx)
// gets one message, so that the provider has connected, and is killed
// with SIGKILL; once it has exited, sends messages go to it and wait
// parked, refused by the provider, until PeerTimeout fails them. The
// report has the time from the sends to the last report and how late that
// was past PeerTimeout, and idle windows as long before the kill (live)
// and after it (idle). With --live a second receiver process, alive,
// gets a stream of 8-byte messages (16 in flight) while the dead peer's
// sends wait: each of their completions retries every parked lane.

func openRDM(provider string) (*domain.Manager, error) {
	return domain.Open(domain.Config{Provider: provider, Address: "127.0.0.1", Endpoints: domain.EndpointRDM})
}

// receive is the child: it prints its address and waits to be killed.
func receive(provider string) error {
	mgr, err := openRDM(provider)
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
	cmd := exec.Command(self, "--shape", "rx", "--provider", provider)
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

func deadPeer(provider string, timeout time.Duration, sends int, live bool) (report, error) {
	r := report{Provider: provider, Sends: sends}
	child, addr, err := startChild(provider)
	if err != nil {
		return r, err
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	mgr, err := openRDM(provider)
	if err != nil {
		return r, err
	}
	defer mgr.Close()
	done := make(chan netio.Status, sends+1)
	var toDead sync.Map // buffer IDs of the sends to the dead peer
	var liveDone atomic.Uint64
	tx, err := rdm.Open(mgr, "127.0.0.1:0", rdm.Config{PeerTimeout: timeout,
		OnData: func(*rdm.Endpoint, rdm.Peer, []byte) {},
		OnSendCompleted: func(key uint64, st netio.Status) {
			if _, dead := toDead.LoadAndDelete(key); dead || !live {
				done <- st
			} else {
				liveDone.Add(1)
			}
		}})
	if err != nil {
		return r, err
	}
	defer tx.Close()
	peer, err := tx.AddPeer(addr)
	if err != nil {
		return r, err
	}
	var stream func() (stop func() uint64)
	if live {
		other, otherAddr, err := startChild(provider)
		if err != nil {
			return r, err
		}
		defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
		otherPeer, err := tx.AddPeer(otherAddr)
		if err != nil {
			return r, err
		}
		stream = func() func() uint64 { return streamTo(tx, otherPeer, &liveDone) }
	}
	wait := timeout + 30*time.Second
	if err := sendTo(tx, peer, &toDead); err != nil {
		return r, err
	}
	if st, err := next(done, wait); err != nil || st != netio.OK {
		return r, fmt.Errorf("the first send, to the live receiver: %v %w", st, err)
	}
	r.CPULiveMs, _ = idle(timeout)
	if err := child.Process.Kill(); err != nil {
		return r, err
	}
	_ = child.Wait()
	r.CPUIdleMs, r.SwitchIdle = idle(timeout)
	cpu1, sw1 := usage()
	start := time.Now()
	stop := func() uint64 { return 0 }
	if stream != nil {
		stop = stream()
	}
	defer stop() // on an error; stops once
	for range sends {
		if err := sendTo(tx, peer, &toDead); err != nil {
			return r, err
		}
	}
	for range sends {
		st, err := next(done, wait)
		if err != nil {
			return r, err
		}
		if st != netio.OK {
			r.Failed++
		}
	}
	elapsed := time.Since(start)
	cpu2, sw2 := usage()
	r.LiveSent = stop()
	late := ms(elapsed - timeout)
	r.FailAfterMs, r.LateMs = ms(elapsed), &late
	r.CPUWaitMs, r.SwitchWait = ms(cpu2-cpu1), sw2-sw1
	return r, nil
}

// sendTo sends 8 bytes to peer, retrying while no buffer is free, and
// notes its buffer's ID in ids.
func sendTo(tx *rdm.Endpoint, peer rdm.Peer, ids *sync.Map) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if buf := tx.GetBuffer(); buf != nil {
			ids.Store(buf.ID(), true)
			st := tx.SendBuffer(buf, 8, peer)
			if st == netio.OK {
				return nil
			}
			ids.Delete(buf.ID())
			tx.ReleaseBuffer(buf.ID())
			if st != netio.NoResources {
				return fmt.Errorf("send: %v", st)
			}
		}
		if time.Now().After(deadline) {
			return errors.New("send: no room for 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// streamTo sends 8-byte messages to peer from a goroutine, as fast as
// buffers come back but leaving half of them free (the dead peer's sends
// need some), until the returned stop is called, which returns how many
// were sent.
func streamTo(tx *rdm.Endpoint, peer rdm.Peer, completed *atomic.Uint64) (stop func() uint64) {
	var quit atomic.Bool
	var sent uint64
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for !quit.Load() {
			if sent-completed.Load() >= 16 {
				time.Sleep(20 * time.Microsecond)
				continue
			}
			buf := tx.GetBuffer()
			if buf == nil {
				time.Sleep(20 * time.Microsecond)
				continue
			}
			if tx.SendBuffer(buf, 8, peer) != netio.OK {
				tx.ReleaseBuffer(buf.ID())
				time.Sleep(20 * time.Microsecond)
				continue
			}
			sent++
		}
	}()
	return func() uint64 {
		quit.Store(true)
		<-ended
		return sent // read after the goroutine ended
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
