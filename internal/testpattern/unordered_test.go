package testpattern

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// senders returns the messages of senders of the given counts, shuffled
// together: what a receiver of several unordered streams sees.
func senders(p *Pattern, size int, counts ...int) [][]byte {
	var all [][]byte
	for _, c := range counts {
		for k := range c {
			all = append(all, message(p, 0, uint64(k), size))
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all
}

func TestUnorderedAcceptsShuffledSenders(t *testing.T) {
	p := New(300)
	u := Unordered{Pattern: p, Len: 300}
	for _, m := range senders(p, 300, 1000, 7, 251, 502, 1) {
		require.NoError(t, u.Check(m))
	}
	assert.NoError(t, u.Finish())
	assert.Equal(t, uint64(1000+7+251+502+1), u.Messages())
	assert.Zero(t, u.Errors)
}

func TestUnorderedFindsDamage(t *testing.T) {
	p := New(64)
	msgs := senders(p, 64, 600, 600)
	t.Run("byte", func(t *testing.T) {
		u := Unordered{Pattern: p}
		bad := append([]byte(nil), msgs[3]...)
		bad[40]++
		var e *Error
		require.ErrorAs(t, u.Check(bad), &e)
		assert.Equal(t, ByteDiffers, e.Kind)
		assert.Equal(t, 40, e.Offset)
		assert.Equal(t, uint64(1), u.Errors)
		assert.Zero(t, u.Messages(), "a damaged message is not counted")
	})
	t.Run("length", func(t *testing.T) {
		u := Unordered{Pattern: p, Len: 64}
		assert.Error(t, u.Check(msgs[0][:63]))
		assert.Error(t, (&Unordered{Pattern: p}).Check(nil), "an empty message names no residue")
	})
	t.Run("first byte past the modulus", func(t *testing.T) {
		u := Unordered{Pattern: p}
		assert.Error(t, u.Check([]byte{251, 252, 253}))
	})
	// Message 300 of one sender (residue 49) lost, or repeated: the count
	// of residue 49 falls below, or rises above, that of its neighbours.
	for name, edit := range map[string]func([][]byte) [][]byte{
		"lost":     func(m [][]byte) [][]byte { return dropOne(m, 300%Mod) },
		"repeated": func(m [][]byte) [][]byte { return append(m, message(p, 0, 300, 64)) },
	} {
		t.Run(name, func(t *testing.T) {
			u := Unordered{Pattern: p}
			for _, m := range edit(append([][]byte(nil), msgs...)) {
				require.NoError(t, u.Check(m))
			}
			assert.Error(t, u.Finish())
			assert.NotZero(t, u.Errors)
		})
	}
}

// dropOne removes the first message whose residue is r.
func dropOne(msgs [][]byte, r int) [][]byte {
	for i, m := range msgs {
		if int(m[0]) == r {
			return append(msgs[:i], msgs[i+1:]...)
		}
	}
	return msgs
}

// FuzzUnordered: whatever arrives, Check never panics, accepts exactly the
// messages the pattern defines (byte i is (data[0] + i) mod 251, data[0]
// below 251) and counts only those.
func FuzzUnordered(f *testing.F) {
	p := New(300)
	f.Add(p.Bytes(0, 7, 300))
	f.Add([]byte{})
	f.Add([]byte{250, 0, 1})
	f.Add([]byte{251})
	f.Add(make([]byte, 301))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := Unordered{Pattern: p}
		ok := len(data) > 0 && len(data) <= p.MaxLen() && data[0] < Mod
		for i := 0; ok && i < len(data); i++ {
			ok = data[i] == want(0, uint64(data[0]), i)
		}
		err := u.Check(data)
		if (err == nil) != ok {
			t.Errorf("Check(% x) = %v, want ok %v", data, err, ok)
		}
		if got := u.Messages(); (got == 1) != ok {
			t.Errorf("Check(% x) counted %d messages", data, got)
		}
	})
}
