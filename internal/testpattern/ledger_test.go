package testpattern

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLedgerFindsLostAndForeign(t *testing.T) {
	p := New(64, WithHeader())
	l := NewLedger(p, 3)
	msg := func(seq uint64) []byte {
		b := make([]byte, 40)
		p.Fill(b, 3, seq)
		return b
	}
	l.Reported(0, true)
	l.Reported(1, true)  // never arrives: lost
	l.Reported(2, false) // canceled, arrives anyway: allowed
	l.Reported(3, false)
	l.Received(msg(0))
	l.Received(msg(2))
	l.Received(msg(4)) // never reported
	l.Received(msg(0)) // twice
	bad := msg(5)
	bad[30]++
	l.Received(bad)
	other := make([]byte, 40)
	p.Fill(other, 4, 6) // another stream
	l.Received(other)

	r := l.Report()
	assert.Equal(t, 2, r.OK)
	assert.Equal(t, 2, r.NotOK)
	assert.Equal(t, []uint64{1}, r.Lost)
	assert.Equal(t, []uint64{4}, r.Unsent)
	assert.Equal(t, 1, r.LateNotOK)
	assert.Equal(t, 1, r.Repeated)
	assert.Len(t, r.Damaged, 2)
	assert.Equal(t, 4, r.Delivered)
	assert.Equal(t, 4, l.Delivered())
	assert.Contains(t, r.String(), "1 lost (1)")

	l.Reported(0, true)
	assert.Equal(t, 2, l.Report().Repeated, "a send reported twice")
}

func TestLedgerNeedsHeader(t *testing.T) {
	assert.Panics(t, func() { NewLedger(New(64), 0) })
}

func TestLedgerMapsKeysInOrder(t *testing.T) {
	l := NewLedger(New(64, WithHeader()), 0)
	l.Sent(7, 0)
	l.Sent(7, 1) // the key reused before its first completion was reported
	l.Completed(7, true)
	l.Completed(7, false)
	l.Completed(8, true) // nothing in flight
	r := l.Report()
	assert.Equal(t, []uint64{0}, r.Lost)
	assert.Equal(t, 1, r.NotOK)
	assert.Equal(t, 1, r.Unknown)
}

// bufferedSend is a send for SendUntilStalled from *free buffers, all
// with key 0, that records what it sent in *sent.
func bufferedSend(l *Ledger, free *int, sent *[]uint64) func(seq uint64) bool {
	return func(seq uint64) bool {
		if *free == 0 {
			return false
		}
		*free--
		l.Sent(0, seq)
		*sent = append(*sent, seq)
		return true
	}
}

func TestSendUntilStalled(t *testing.T) {
	l := NewLedger(New(64, WithHeader()), 0)
	free := 2
	var sent []uint64
	send := bufferedSend(l, &free, &sent)
	assert.True(t, l.SendUntilStalled(100, time.Millisecond, send), "no completion: stalled")
	assert.Equal(t, []uint64{0, 1}, sent)
	free = 100
	assert.False(t, l.SendUntilStalled(5, time.Millisecond, send), "bounded by max")
}

func TestLedgerReportErr(t *testing.T) {
	p := New(64, WithHeader())
	l := NewLedger(p, 0)
	assert.NoError(t, l.Report().Err(), "nothing sent, nothing wrong")
	l.Reported(0, true)
	l.Reported(1, false)
	msg := make([]byte, 30)
	p.Fill(msg, 0, 0)
	l.Received(msg)
	assert.NoError(t, l.Report().Err(), "a canceled send may be missing")
	l.Reported(2, true)
	err := l.Report().Err()
	assert.ErrorContains(t, err, "1 messages reported OK never arrived (2)")
	l.Received([]byte("not a message of the pattern at all"))
	l.Completed(9, true)
	err = l.Report().Err()
	assert.ErrorContains(t, err, "1 damaged messages")
	assert.ErrorContains(t, err, "1 completions of keys with nothing in flight")
}

// TestSendUntilStalledConfirmed: a quiet window the check does not confirm
// is no stall: the sender waits on, sends again once a buffer is free
// (the pause ended), and stops only at a quiet the check confirms.
func TestSendUntilStalledConfirmed(t *testing.T) {
	l := NewLedger(New(64, WithHeader()), 0)
	free := 1
	var sent []uint64
	send := bufferedSend(l, &free, &sent)
	asked := 0
	stalled := func() bool {
		asked++
		switch asked {
		case 1: // a pause: the sender's buffer comes back after it
			free++
			l.Completed(0, true)
			return false
		case 2:
			return false // a quiet it does not confirm either
		}
		return true
	}
	assert.True(t, l.SendUntilStalledConfirmed(100, time.Millisecond, send, stalled))
	assert.Equal(t, []uint64{0, 1}, sent, "sent on after the unconfirmed quiet")
	assert.Equal(t, 3, asked, "asked after each quiet, and stopped at the first yes")
}

// TestAwaitDelivered: the wait goes on while messages arrive, however long
// that takes, ends once n arrived, and gives up only after idle without one.
func TestAwaitDelivered(t *testing.T) {
	p := New(64, WithHeader())
	l := NewLedger(p, 0)
	assert.True(t, l.AwaitDelivered(0, time.Millisecond), "nothing to wait for")
	go func() {
		msg := make([]byte, 64)
		for seq := range uint64(20) {
			time.Sleep(5 * time.Millisecond) // 100 ms in all, in steps far below idle
			p.Fill(msg, 0, seq)
			l.Received(msg)
		}
	}()
	assert.True(t, l.AwaitDelivered(20, time.Minute), "every message arrived")
	start := time.Now()
	assert.False(t, l.AwaitDelivered(21, 20*time.Millisecond), "no 21st message")
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "waited idle first")
}
