package pubsub

import (
	"testing"

	"github.com/netio-go/netio/coalesce"
)

// FuzzSubscriberOnData feeds arbitrary buffers to a subscriber's data
// path (tags 1 and 2 subscribed on the connection, as
// TestOnDataRuns has it). It must never panic, must deliver exactly the
// messages of tags 1 and 2 the decoder finds, in order, with their data
// and status, count every other message but the control records as
// unsolicited, and its counters must agree with what it delivered.
func FuzzSubscriberOnData(f *testing.F) {
	f.Add(runsBuffer(f))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0, 'a', 1, 0, 0, 0, 'b', 1, 0, 0, 0x40, 3, 'c'})
	f.Fuzz(func(t *testing.T, buf []byte) {
		type msg struct {
			tag    uint64
			status uint8
			data   string
		}
		var got []msg
		s := runsSubscriber(func(m Message) { got = append(got, msg{m.Tag, m.Status, string(m.Data)}) })
		s.onData(nil, buf)

		var want []msg
		var others uint64
		d := coalesce.NewDecoder(buf)
		for d.Next() {
			switch tag := d.Tag(); tag {
			case 1, 2:
				want = append(want, msg{tag, d.Status(), string(d.Data())})
			case ControlTag:
			default:
				others++
			}
		}
		if len(got) != len(want) {
			t.Fatalf("delivered %d messages, the decoder has %d of tags 1 and 2", len(got), len(want))
		}
		perTag := map[uint64]uint64{}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("message %d: delivered %+v, want %+v", i, got[i], want[i])
			}
			perTag[want[i].tag]++
		}
		st := s.Stats()
		if st.Messages != uint64(len(want)) || st.Unsolicited != others {
			t.Fatalf("stats %+v: want %d messages, %d unsolicited", st, len(want), others)
		}
		for _, tag := range []uint64{1, 2} {
			if ts, _ := s.TagStats(tag); ts.Messages != perTag[tag] {
				t.Fatalf("tag %d: TagStats.Messages %d, delivered %d", tag, ts.Messages, perTag[tag])
			}
		}
		if (d.Err() != nil) != (st.Malformed == 1) {
			t.Fatalf("decoder error %v, Malformed %d", d.Err(), st.Malformed)
		}
	})
}
