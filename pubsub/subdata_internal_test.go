package pubsub

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/coalesce"
)

// runsBuffer encodes a SYNC record of tags 1 and 2 at 0, then five
// messages of tag 1, a status-flagged one of tag 2 and two of tag 1 again.
func runsBuffer(t testing.TB) []byte {
	enc := coalesce.NewEncoder(make([]byte, 4096))
	for _, tag := range []uint64{1, 2} {
		rec, err := enc.Reserve(ControlTag, 0, RecordLen)
		require.NoError(t, err)
		putRecord((*[RecordLen]byte)(rec), RecordSync, tag, 0)
	}
	for i, tag := range []uint64{1, 1, 1, 1, 1, 2, 1, 1} {
		status := uint8(0)
		if tag == 2 {
			status = StatusFirmwareCRC
		}
		require.NoError(t, enc.Append(tag, status, []byte{byte(i)}))
	}
	return enc.Bytes()
}

// runsSubscriber returns a subscriber with tags 1 and 2 subscribed on the
// connection its onData reads (as BenchmarkSubscriberDecode64 has it).
func runsSubscriber(onMessage func(Message)) *Subscriber {
	s := &Subscriber{cfg: SubscriberConfig{OnMessage: onMessage}}
	tags := map[uint64]*recvTag{1: {tag: 1, gen: 1, synced: true}, 2: {tag: 2, gen: 1, synced: true}}
	s.tags.Store(&tags)
	s.lastConn = &dataConn{gen: 1, pub: "p"}
	return s
}

// Runs of one tag's messages are numbered, counted and delivered in
// order, as single messages are.
func TestOnDataRuns(t *testing.T) {
	var got []Message
	s := runsSubscriber(func(m Message) { got = append(got, m) })
	s.onData(nil, runsBuffer(t))
	require.Len(t, got, 8)
	var seqs [3][]uint64
	for i, m := range got {
		assert.Equal(t, []byte{byte(i)}, m.Data, "message %d in order", i)
		assert.Equal(t, "p", m.Publisher)
		if i != 5 {
			assert.Zero(t, m.Status, "message %d carries no status", i)
		}
		seqs[m.Tag] = append(seqs[m.Tag], m.Seq)
	}
	assert.Equal(t, []uint64{0, 1, 2, 3, 4, 5, 6}, seqs[1])
	assert.Equal(t, []uint64{0}, seqs[2])
	assert.Equal(t, StatusFirmwareCRC, got[5].Status)
	one, _ := s.TagStats(1)
	two, _ := s.TagStats(2)
	assert.Equal(t, TagStats{Messages: 7, Bytes: 7, NextSeq: 7}, one)
	assert.Equal(t, uint64(1), two.Flagged)
	assert.Equal(t, uint64(1), two.StatusBits[3])
	assert.Equal(t, uint64(8), s.Stats().Messages)
}

// A change of the subscribed tags in the middle of a run (an Unsubscribe
// while the poller delivers) ends the run: the tag's later messages in
// the same buffer are dropped as unsolicited, not delivered.
func TestOnDataRunEndsWhenTagsChange(t *testing.T) {
	var s *Subscriber
	var got []uint64
	s = runsSubscriber(func(m Message) {
		got = append(got, m.Seq)
		if m.Tag == 1 && m.Seq == 1 { // as Unsubscribe(1) does, under s.mu
			m := maps.Clone(*s.tags.Load())
			delete(m, 1)
			s.tags.Store(&m)
			s.tagsVer.Add(1)
		}
	})
	s.onData(nil, runsBuffer(t))
	assert.Equal(t, []uint64{0, 1, 0}, got, "tag 1's messages 0 and 1, then tag 2's")
	assert.Equal(t, uint64(5), s.Stats().Unsolicited, "tag 1's other five")
}

// A run of a tag that is not subscribed is dropped message by message,
// each counted unsolicited, before the tags ever changed (their version
// still 0), and the subscribed tag's message in the same buffer is
// delivered.
func TestOnDataRunOfUnsubscribedTag(t *testing.T) {
	var got []Message
	s := runsSubscriber(func(m Message) { got = append(got, m) })
	tags := map[uint64]*recvTag{2: (*s.tags.Load())[2]}
	s.tags.Store(&tags)
	require.Zero(t, s.tagsVer.Load())
	s.onData(nil, runsBuffer(t))
	require.Len(t, got, 1)
	assert.Equal(t, uint64(2), got[0].Tag)
	assert.Equal(t, uint64(7), s.Stats().Unsolicited, "tag 1's seven messages")
	assert.Equal(t, uint64(1), s.Stats().Messages)
}
