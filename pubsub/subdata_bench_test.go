package pubsub

import (
	"testing"

	"github.com/netio-go/netio/coalesce"
)

// BenchmarkSubscriberDecode64 is the subscriber's cost per 64-byte message
// on the poller goroutine, without the transport: a received buffer of one
// tag's messages (a SYNC record first, as a shared buffer has) is decoded,
// numbered, counted and handed to an empty OnMessage. ns/msg is what the
// subscriber side of hack/pubsub-perf.sh pays on top of the socket.
func BenchmarkSubscriberDecode64(b *testing.B) {
	const tag = 1
	buf := make([]byte, 64<<10)
	enc := coalesce.NewEncoder(buf)
	rec, err := enc.Reserve(ControlTag, 0, RecordLen)
	if err != nil {
		b.Fatal(err)
	}
	putRecord((*[RecordLen]byte)(rec), RecordSync, tag, 0)
	msg := make([]byte, 64)
	for enc.Append(tag, 0, msg) == nil {
	}
	n := enc.Count() - 1
	s := &Subscriber{cfg: SubscriberConfig{OnMessage: func(Message) {}}}
	tags := map[uint64]*recvTag{tag: {tag: tag, gen: 1, synced: true}}
	s.tags.Store(&tags)
	s.lastConn = &dataConn{gen: 1, pub: "bench"} // for the nil endpoint below
	data := enc.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		putRecord((*[RecordLen]byte)(data[12:12+RecordLen]), RecordSync, tag, uint64(i*n))
		s.onData(nil, data)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
	if got := s.Stats(); got.Messages != uint64(b.N*n) || got.Gaps != 0 || got.OutOfSequence != 0 {
		b.Fatalf("%+v after %d buffers of %d", got, b.N, n)
	}
}
