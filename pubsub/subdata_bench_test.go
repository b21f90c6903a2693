package pubsub

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netio-go/netio/coalesce"
)

// BenchmarkSubscriberDecode64 is the subscriber's cost per 64-byte message
// on the poller goroutine, without the transport: a received buffer of one
// tag's messages (a SYNC record first, as a shared buffer has) is decoded,
// numbered, counted and handed to an OnMessage that counts, as netio-perf
// subscribe's does. ns/msg is what the subscriber side of
// hack/pubsub-perf.sh pays on top of the socket; cpu-ns/msg is the same
// from the CPU time of the benchmark's thread (locked to it), which a
// machine busy with other processes changes less than the wall clock.
func BenchmarkSubscriberDecode64(b *testing.B) { benchSubscriberDecode(b, 1) }

// BenchmarkSubscriberDecode64Tags is BenchmarkSubscriberDecode64 with
// the messages of 16 tags taking turns, one message each, as a publisher
// coalesces many links' messages for one subscriber: every message
// carries its tag, and the subscriber looks each one up.
func BenchmarkSubscriberDecode64Tags(b *testing.B) { benchSubscriberDecode(b, 16) }

// benchSubscriberDecode decodes a buffer of 64-byte messages of ntags
// tags taking turns, each tag's SYNC record first.
func benchSubscriberDecode(b *testing.B, ntags int) {
	buf := make([]byte, 64<<10)
	enc := coalesce.NewEncoder(buf)
	tags := map[uint64]*recvTag{}
	var recs [][]byte
	for tag := range uint64(ntags) {
		rec, err := enc.Reserve(ControlTag, 0, RecordLen)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
		tags[tag] = &recvTag{tag: tag, gen: 1, synced: true}
	}
	msg := make([]byte, 64)
	per := coalesce.HeaderWordLen + len(msg) // a message of the tag before
	if ntags > 1 {
		per += coalesce.TagLen
	}
	for len(buf)-len(enc.Bytes()) >= ntags*per { // whole rounds: every tag has n/ntags
		for tag := range uint64(ntags) {
			if err := enc.Append(tag, 0, msg); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := enc.Count() - ntags
	var got int
	s := &Subscriber{cfg: SubscriberConfig{OnMessage: func(Message) { got++ }}}
	s.tags.Store(&tags)
	s.lastConn = &dataConn{gen: 1, pub: "bench"} // for the nil endpoint below
	data := enc.Bytes()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPUTime(b)
	for i := range b.N {
		for tag, rec := range recs {
			putRecord((*[RecordLen]byte)(rec), RecordSync, uint64(tag), uint64(i*n/ntags))
		}
		s.onData(nil, data)
	}
	cpu := threadCPUTime(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
	b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/msg")
	if st := s.Stats(); st.Messages != uint64(b.N*n) || got != b.N*n || st.Gaps != 0 || st.OutOfSequence != 0 {
		b.Fatalf("%+v, %d delivered, after %d buffers of %d", st, got, b.N, n)
	}
}

// threadCPUTime returns the CPU time the calling thread has used, in ns.
// It stops the benchmark when the clock cannot be read, rather than
// report a cpu-ns/msg made of nothing.
func threadCPUTime(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("reading the thread's CPU clock: %v", err)
	}
	return ts.Nano()
}
