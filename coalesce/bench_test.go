package coalesce

import (
	"testing"
)

// benchBufLen is a typical send buffer: 64 KiB holds about a thousand
// 64-byte messages.
const benchBufLen = 64 << 10

// fullBuffer returns a buffer filled with 64-byte messages of one tag, and
// how many it holds.
func fullBuffer() ([]byte, int) {
	e := NewEncoder(make([]byte, benchBufLen))
	payload := make([]byte, 64)
	for e.Append(42, 0, payload) == nil {
	}
	return e.Bytes(), e.Count()
}

// BenchmarkEncode64 appends one 64-byte message per op, starting a new
// buffer when one is full, as a coalescing sender does: with Append, and with
// AppendV given the payload in two parts (a 16-byte header and 48 bytes of
// data).
func BenchmarkEncode64(b *testing.B) {
	payload := make([]byte, 64)
	b.Run("Append", func(b *testing.B) { benchmarkEncode(b, payload, nil) })
	b.Run("AppendV", func(b *testing.B) { benchmarkEncode(b, nil, [][]byte{payload[:16], payload[16:]}) })
}

// benchmarkEncode appends payload, or parts when payload is nil, b.N times.
func benchmarkEncode(b *testing.B, payload []byte, parts [][]byte) {
	buf := make([]byte, benchBufLen)
	add := func(e *Encoder) error {
		if payload == nil {
			return e.AppendV(42, 0, parts)
		}
		return e.Append(42, 0, payload)
	}
	var e Encoder
	e.Reset(buf)
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		if add(&e) != nil {
			e.Reset(buf)
			if err := add(&e); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecode64 decodes one full buffer of 64-byte messages per op with
// a callback, as a receiver does, and reports the time per message.
func BenchmarkDecode64(b *testing.B) {
	buf, count := fullBuffer()
	var sum int
	fn := func(tag uint64, data []byte, status uint8) { sum += len(data) }
	b.SetBytes(int64(64 * count))
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(buf, fn); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*count), "ns/msg")
	if sum != 64*count*b.N {
		b.Fatalf("decoded %d payload bytes, want %d", sum, 64*count*b.N)
	}
}

// BenchmarkDecoderNext64 decodes one 64-byte message per op with the
// iterator, without a callback.
func BenchmarkDecoderNext64(b *testing.B) {
	buf, _ := fullBuffer()
	var d Decoder
	d.Reset(buf)
	var sum int
	b.SetBytes(64)
	b.ReportAllocs()
	for b.Loop() {
		if !d.Next() {
			d.Reset(buf)
			d.Next()
		}
		sum += len(d.Data())
	}
	if sum != 64*b.N {
		b.Fatalf("decoded %d payload bytes, want %d", sum, 64*b.N)
	}
}
