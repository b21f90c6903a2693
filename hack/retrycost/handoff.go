package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// The handoff shape: a connected tcp sender with Inject and a small
// MaxInjectsHeld streams 256 KiB messages to a receiver that stops reading
// at its first one, until the provider holds the bound (an 8-byte send is
// refused). Then a 256 KiB send and an 8-byte one right behind it: the
// large one goes through the poller's hand-off queue, so the small one
// queues behind it, and the drain stalls at the inject bound with nothing
// that could complete; its retry timer alone tries again, for --timeout.
const (
	handOffLarge = 256 << 10 // sendcore.HandOffSize: posted by the poller
	handOffHeld  = 8         // SendConfig.MaxInjectsHeld
)

func stalledHandOff(window time.Duration) (report, error) {
	r := report{Provider: "tcp"}
	mgr, err := domain.Open(domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	if err != nil {
		return r, err
	}
	defer mgr.Close()
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	defer release() // before the listener's Close
	var first sync.Once
	l, err := endpoint.Listen(mgr, "127.0.0.1:0", endpoint.ListenConfig{
		Params: netio.ReceiveParams{BufferSize: handOffLarge, BufferCount: 16},
		OnData: func(*endpoint.ReceiveEndpoint, []byte) {
			first.Do(func() { // stops reading, bounded
				select {
				case <-gate:
				case <-time.After(window + time.Minute):
				}
			})
		}})
	if err != nil {
		return r, err
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := endpoint.Dial(ctx, mgr, l.Addr(), endpoint.SendConfig{
		Params: netio.BufferedSendParams{BufferSize: handOffLarge, BufferCount: 64},
		Inject: true, InjectLinger: time.Millisecond, MaxInjectsHeld: handOffHeld})
	if err != nil {
		return r, err
	}
	defer s.Close()
	if err := fillToBound(s); err != nil {
		return r, err
	}
	r.CPUIdleMs, r.SwitchIdle = idle(window)
	cpu0, sw0 := usage()
	for queued := false; !queued; {
		if r.Tries++; r.Tries > 20 {
			return r, errors.New("the small send never queued behind the large one")
		}
		if send(s, handOffLarge) != netio.OK {
			return r, errors.New("the large send was refused")
		}
		queued = send(s, 8) == netio.OK // else posted at once, and refused
	}
	time.Sleep(window)
	cpu1, sw1 := usage()
	r.CPUWaitMs, r.SwitchWait = ms(cpu1-cpu0), sw1-sw0
	release()
	return r, nil
}

// fillToBound sends large messages until the provider holds the inject
// bound: an 8-byte send (an inject) is refused ten times in a row.
func fillToBound(s *endpoint.SendEndpointBuffered) error {
	deadline := time.Now().Add(20 * time.Second)
	for refused := 0; refused < 10; {
		if time.Now().After(deadline) {
			return errors.New("the provider never held the inject bound")
		}
		if send(s, 8) == netio.OK {
			refused = 0
			send(s, handOffLarge)
		} else {
			refused++
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// send sends n bytes, giving the buffer back when the send is refused.
func send(s *endpoint.SendEndpointBuffered, n int) netio.Status {
	buf := s.GetBuffer()
	if buf == nil {
		return netio.NoResources
	}
	st := s.SendBuffer(buf, n)
	if st != netio.OK {
		s.ReleaseBuffer(buf.ID())
	}
	return st
}
