// Package hostile_test runs a listener that serves a well-behaved stream
// while a raw libfabric peer (peer/hostile.c) misbehaves against it:
// messages larger than the posted buffers, arbitrary bytes, a flood of
// connection requests, a connection that never sends. The stream must
// arrive intact, the receiver must count and log what went wrong, and the
// process must hold what it held before once the peer is gone.
package hostile_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/endpoint"
	"github.com/netio-go/netio/fabric"
	"github.com/netio-go/netio/tests/storm/leakcheck"
)

// TestOversizeMessages sends messages of 64 KiB into 4 KiB receive
// buffers. No byte of them may reach OnData, each loss the provider
// reports must reach OnReceiveError (ErrFailed wrapping FI_ETRUNC) and
// the log.
//
// The providers differ: sockets reports every oversize message as a
// truncated receive and keeps the connection; tcp reports the first one
// and then drops the connection, so the receiver never hears of the rest
// (the peer's later sends fail, or complete unseen: tcp completes a send
// once the kernel has the bytes).
func TestOversizeMessages(t *testing.T) {
	const count, size = 20, 64 << 10
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newScene(t, prov, raw)
			rep, _, _ := s.attack("oversize", "--size", strconv.Itoa(size), "--count", strconv.Itoa(count), "--linger", "300")
			s.l.WaitQuiet(t, waitTimeout)
			errs := s.receiveErrors()
			t.Logf("%s: %d oversize messages sent; receiver: %d receive errors, first: %v", prov, rep.Sent, len(errs), first(errs))
			t.Logf("%s: receiver log:\n%s", prov, s.logs.summary())
			t.Logf("%s: connections that ended otherwise than by the peer's shutdown: %d", prov, s.l.Unexpected.Load())

			assert.Empty(t, s.foreignMessages(), "oversize data passed to OnData")
			for _, err := range errs {
				assert.ErrorIs(t, err, netio.ErrFailed)
				assert.ErrorIs(t, err, fabric.ETRUNC)
			}
			if prov == "sockets" {
				assert.Equal(t, count, rep.Sent, "oversize messages the peer posted")
				assert.Len(t, errs, count, "oversize messages reported")
			} else {
				assert.Positive(t, rep.Sent, "oversize messages the peer posted before tcp dropped the connection")
				assert.Len(t, errs, 1, "oversize messages reported before tcp dropped the connection")
				assert.Equal(t, 1, rep.Shutdown, "the peer saw its connection dropped")
			}
			assert.Equal(t, int64(len(errs)), s.recvErrs.Load())
			assert.Equal(t, uint64(len(errs)), s.endpointStats().Errors, "receive errors in the endpoints' Stats")
			assert.Equal(t, len(errs), s.logs.count(zerolog.WarnLevel, "receive failed"), "receive errors logged")
			s.assertBack("after oversize messages")
		})
	}
}

// first returns the first error, or nil.
func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestGarbage sends arbitrary bytes: coalesced buffers that break
// netio3's format one way each, well-formed coalesced buffers, and random
// bytes of every size up to the receive buffer.
//
// A raw listener (OnData) has no framing of its own (the wire carries
// exactly the application's bytes): it must deliver every message exactly
// as sent and report no error. A coalescing listener (OnMessage) must
// deliver the messages of every well-formed buffer and the valid prefix of
// every malformed one, in order, and count (ReceiveStats.MalformedBuffers),
// log and report (OnReceiveError, coalesce.ErrMalformed) every malformed
// buffer, while its good stream, coalesced too, goes on intact.
func TestGarbage(t *testing.T) {
	malformed := malformedCoalesced()
	wellFormed, wellFormedCounts := wellFormedCoalesced(t)
	for i, b := range malformed {
		_, err := coalesce.Validate(b)
		require.ErrorIs(t, err, coalesce.ErrMalformed, "crafted malformed buffer %d (% x)", i, b)
	}
	for i, b := range wellFormed {
		n, err := coalesce.Validate(b)
		require.NoError(t, err, "well-formed buffer %d", i)
		require.Equal(t, wellFormedCounts[i], n, "well-formed buffer %d", i)
	}
	random := randomRecords(rand.New(rand.NewPCG(6, 4)), 200, recvParams.BufferSize)
	records := slices.Concat(malformed, wellFormed, random)
	file := filepath.Join(t.TempDir(), "garbage")
	require.NoError(t, os.WriteFile(file, encodeRecords(records), 0o600))
	for _, prov := range providers {
		t.Run(prov+"/raw", func(t *testing.T) {
			s := newScene(t, prov, raw)
			rep, _, _ := s.attack("garbage", "--file", file, "--linger", "300")
			s.l.WaitQuiet(t, waitTimeout)
			got := s.foreignMessages()
			t.Logf("%s: %d garbage messages sent, %d delivered; receiver log:\n%s", prov, rep.Sent, len(got), s.logs.summary())
			assert.Equal(t, len(records), rep.Sent, "garbage messages the peer posted")
			assert.Equal(t, rep.Sent, rep.Completed, "garbage messages completed")
			assertSameMessages(t, records, got)
			assert.Zero(t, s.recvErrs.Load(), "receive errors")
			assert.Zero(t, s.l.Unexpected.Load(), "connections that ended with an error")
			s.assertBack("after garbage, raw")
		})
		t.Run(prov+"/coalesced", func(t *testing.T) {
			s := newScene(t, prov, coalesced)
			rep, _, _ := s.attack("garbage", "--file", file, "--linger", "300")
			s.l.WaitQuiet(t, waitTimeout)
			wantMessages, wantMalformed := decodeAll(records)
			got, errs, stats := s.foreignMessages(), s.receiveErrors(), s.endpointStats()
			t.Logf("%s: %d garbage buffers sent; the receiver decoded %d messages from them and counted %d malformed buffers; stats %+v",
				prov, rep.Sent, len(got), len(errs), stats)
			t.Logf("%s: receiver log:\n%s", prov, s.logs.summary())
			for _, err := range errs[:min(len(errs), len(malformed))] {
				t.Logf("%s: reported: %v", prov, err)
			}
			assert.Equal(t, len(records), rep.Sent, "garbage buffers the peer posted")
			assertSameMessages(t, wantMessages, got)
			require.Len(t, errs, wantMalformed, "malformed buffers reported to OnReceiveError")
			for _, err := range errs {
				var merr *coalesce.MalformedError
				assert.ErrorAs(t, err, &merr)
			}
			assert.Equal(t, uint64(wantMalformed), stats.MalformedBuffers, "ReceiveStats.MalformedBuffers")
			assert.Equal(t, uint64(len(wantMessages)), stats.CoalescedMessages, "ReceiveStats.CoalescedMessages")
			assert.Equal(t, uint64(len(records)), stats.Messages, "ReceiveStats.Messages")
			assert.Zero(t, stats.Errors, "receives that failed")
			assert.Equal(t, wantMalformed, s.logs.count(zerolog.WarnLevel, "malformed coalesced buffer"), "malformed buffers logged")
			assert.Zero(t, s.l.Unexpected.Load(), "connections that ended with an error")
			s.assertBack("after garbage, coalesced")
		})
	}
}

// decodeAll returns what a coalescing receiver must deliver of buffers:
// the payloads of every well-formed buffer and of the valid prefix of every
// malformed one, in order, and how many are malformed.
func decodeAll(buffers [][]byte) (messages [][]byte, malformed int) {
	for _, b := range buffers {
		err := coalesce.Decode(b, func(_ uint64, data []byte, _ uint8) {
			messages = append(messages, bytes.Clone(data))
		})
		if err != nil {
			malformed++
		}
	}
	return messages, malformed
}

// assertSameMessages checks that got holds exactly want, in order, and
// shows the first difference only.
func assertSameMessages(t *testing.T, want, got [][]byte) {
	t.Helper()
	if !assert.Len(t, got, len(want), "messages delivered") {
		return
	}
	differ := 0
	for i := range want {
		if !bytes.Equal(want[i], got[i]) {
			if differ == 0 {
				assert.Equal(t, want[i], got[i], "message %d, the first that differs", i)
			}
			differ++
		}
	}
	assert.Zero(t, differ, "messages delivered other than sent")
}

// malformedCoalesced returns buffers that break netio3's coalesced format
// (a 32-bit little-endian header: bit 31 a tag follows, bit 30 a status
// byte follows, bits 0-29 the payload size; then the status, the 64-bit
// tag, the payload; see docs/wire.md), one way each.
func malformedCoalesced() [][]byte {
	const tagBit, statusBit = 1 << 31, 1 << 30
	header := func(h uint32) []byte { return binary.LittleEndian.AppendUint32(nil, h) }
	tagged := func(size uint32, payload ...byte) []byte {
		b := binary.LittleEndian.AppendUint64(header(tagBit|size), 0x1122334455667788)
		return append(b, payload...)
	}
	return [][]byte{
		{0x05, 0x00},                         // a header cut short
		append(header(tagBit|4), 1, 2, 3),    // the tag cut short
		header(tagBit | statusBit | 8),       // status and tag missing
		tagged(1000, 1, 2, 3, 4),             // a payload longer than the buffer
		tagged(coalesce.MaxPayload, 0),       // the largest payload size, nothing there
		append(header(3), 'a', 'b', 'c'),     // a first message without its tag
		append(tagged(2, 'o', 'k'), 0x07),    // a whole message, then a stray byte
		append(tagged(0), header(tagBit)...), // a second header whose tag is missing
	}
}

// wellFormedCoalesced returns coalesced buffers as the encoder writes
// them, starting with an empty message (a buffer of no messages, which is
// valid), and how many messages each holds.
func wellFormedCoalesced(t *testing.T) (bufs [][]byte, counts []int) {
	t.Helper()
	bufs, counts = [][]byte{{}}, []int{0}
	for i := range 2 {
		enc := coalesce.NewEncoder(make([]byte, 256))
		require.NoError(t, enc.Append(7, 0, []byte("first")))
		require.NoError(t, enc.Append(7, uint8(i+1), []byte("second, with a status")))
		require.NoError(t, enc.Append(8, 0, nil))
		bufs, counts = append(bufs, bytes.Clone(enc.Bytes())), append(counts, enc.Count())
	}
	return bufs, counts
}

// randomRecords returns n messages of random bytes, 1 to max bytes long,
// one of them exactly max.
func randomRecords(rng *rand.Rand, n, max int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		size := 1 + rng.IntN(max)
		if i == n/2 {
			size = max
		}
		out[i] = make([]byte, size)
		for j := range out[i] {
			out[i][j] = byte(rng.Uint32())
		}
	}
	return out
}

// encodeRecords writes records the way the peer reads them: a 32-bit
// little-endian length, then the bytes.
func encodeRecords(records [][]byte) []byte {
	var out []byte
	for _, r := range records {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(r)))
		out = append(out, r...)
	}
	return out
}

// TestConnectionFlood opens 200 connection requests at once: closing each
// endpoint right after its request; holding all of them for a second
// without sending and then exiting without closing; and holding them
// against a listener with MaxConnections, which must turn the excess away
// with libfabric rejects before registering anything for them. The
// listener must keep serving the stream, and every connection the flood
// left behind must end and give back its buffers.
func TestConnectionFlood(t *testing.T) {
	const requests, maxConns = 200, 16
	cases := []struct {
		name, then string
		maxConns   int
	}{{"close", "close", 0}, {"hold", "hold", 0}, {"hold-capped", "hold", maxConns}}
	for _, prov := range providers {
		for _, c := range cases {
			t.Run(prov+"/"+c.name, func(t *testing.T) {
				s := newScene(t, prov, raw, func(cfg *endpoint.ListenConfig) { cfg.MaxConnections = c.maxConns })
				rep, peak, live := s.attack("flood", "--count", strconv.Itoa(requests), "--then", c.then, "--hold", "1000")
				t.Logf("%s: flood of %d, %s: at the peak %d connections open, holding %v", prov, requests, c.name, live, peak)
				t.Logf("%s: receiver log:\n%s", prov, s.logs.summary())
				assert.Equal(t, requests, rep.Requests)
				if c.then == "hold" {
					assert.Equal(t, requests, rep.Connected+rep.Refused, "requests answered")
					assert.Positive(t, rep.Connected, "requests accepted")
					// The good stream plus every accepted request.
					assert.GreaterOrEqual(t, live, 1+rep.Connected, "connections open while the flood held them")
				}
				if c.maxConns > 0 {
					// The good stream holds one of the connections allowed.
					assert.LessOrEqual(t, rep.Connected, c.maxConns-1, "flood connections accepted past the cap")
					assert.LessOrEqual(t, live, c.maxConns, "connections open at once")
					// A receive region per connection, and the good
					// sender's pool (same domain).
					assert.LessOrEqual(t, peak.Registrations, s.before.Registrations+c.maxConns+1, "registrations at the peak")
				}
				stale := s.l.WaitSteady(t, waitTimeout)
				if prov == "sockets" && stale > 0 {
					// sockets loses the end of connections whose peer left
					// while fi_accept ran (see tests/storm): those must
					// hold exactly their buffers, and Close must free them.
					leakcheck.AssertOnlyReceivers(t, s.mgr, s.before, stale, recvParams, prov+" flood, stale connections")
					for _, ep := range s.l.Connections() {
						assert.NoError(t, ep.Close())
					}
				}
				assert.Zero(t, s.recvErrs.Load(), "receive errors")
				assert.Empty(t, s.foreignMessages(), "data from connections that sent none")
				s.assertBack("after a flood of " + strconv.Itoa(requests) + ", " + c.name)
			})
		}
	}
}

// TestIdlePeer connects a peer that never sends and holds its connection
// for two seconds. The listener must keep serving the stream, the idle
// connection must stay established meanwhile (a quiet front-end is not an
// error), and once the peer closes, it must end and give back its buffers.
func TestIdlePeer(t *testing.T) {
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			s := newScene(t, prov, raw)
			rep, peak, live := s.attack("idle", "--hold", "2000")
			t.Logf("%s: idle peer: at the peak %d connections open, holding %v", prov, live, peak)
			assert.Equal(t, 1, rep.Connected, "the idle peer connected")
			assert.Zero(t, rep.Shutdown, "the idle connection was dropped while the peer held it")
			assert.Equal(t, 2, live, "connections open: the stream and the idle peer")
			assert.Zero(t, s.recvErrs.Load(), "receive errors")
			assert.Empty(t, s.foreignMessages(), "data from a peer that sent none")
			s.assertBack("after an idle peer")
			assert.Zero(t, s.l.Unexpected.Load(), "connections that ended with an error")
		})
	}
}
