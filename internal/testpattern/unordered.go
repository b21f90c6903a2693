package testpattern

import "fmt"

// Unordered checks the messages of any number of senders, each sending
// stream 0 without a header from message 0 on (netio-perf --verify), when
// the receiver can tell neither the senders apart nor the order of their
// messages: connectionless endpoints, whose providers may not name the
// sender and need not deliver in order.
//
// Without a header the first byte of message k is k mod Mod, so each
// message is checked whole against the pattern of the message it claims to
// be, and counted by that residue. A sender of c messages adds one to the
// counts of residues 0, 1, 2, ... in turn, so the counts of any set of
// senders never grow from one residue to the next; Finish checks that,
// which finds a lost or repeated message unless it was the last (or
// Mod-th from last, ...) of its stream, which the receiver's expected
// total finds instead. It is not safe for concurrent use.
type Unordered struct {
	Pattern *Pattern
	// Len, if not 0, is the length every message must have; else a message
	// may be any prefix of its pattern, at least 1 byte long.
	Len int
	// Errors counts messages that did not match (Check) and residues whose
	// count went up (Finish).
	Errors uint64

	counts [Mod]uint64
}

// Check checks data as the message its first byte says it is and counts
// it; it returns what differs (nil if nothing).
func (u *Unordered) Check(data []byte) error {
	var err error
	switch {
	case len(data) == 0 || (u.Len != 0 && len(data) != u.Len):
		err = &Error{Kind: WrongLength, Len: len(data), Got: uint64(len(data)), Want: uint64(max(u.Len, 1))}
	case int(data[0]) >= Mod:
		err = &Error{Kind: ByteDiffers, Seq: uint64(data[0]), Len: len(data), Got: uint64(data[0]), Want: uint64(data[0]) % Mod}
	default:
		err = u.Pattern.Check(data, 0, uint64(data[0]))
	}
	if err != nil {
		u.Errors++
		return err
	}
	u.counts[data[0]]++
	return nil
}

// Messages returns the messages that matched.
func (u *Unordered) Messages() uint64 {
	var n uint64
	for _, c := range u.counts {
		n += c
	}
	return n
}

// Finish checks that the messages counted can be the first messages of
// some set of senders: the count of residue r+1 is never above that of r.
// Each residue where it is counts one error; the first is returned.
func (u *Unordered) Finish() error {
	var first error
	for r := 1; r < Mod; r++ {
		if u.counts[r] > u.counts[r-1] {
			u.Errors++
			if first == nil {
				first = fmt.Errorf("testpattern: %d messages k ≡ %d (mod %d) but only %d k ≡ %d: messages lost or repeated",
					u.counts[r], r, Mod, u.counts[r-1], r-1)
			}
		}
	}
	return first
}
