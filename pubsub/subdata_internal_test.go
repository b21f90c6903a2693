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
func runsBuffer(t testing.TB) []byte { return runsBufferFrom(t, 0, 0) }

// runsBufferFrom is runsBuffer with SYNC records of tag 1 at one and of
// tag 2 at two.
func runsBufferFrom(t testing.TB, one, two uint64) []byte {
	enc := coalesce.NewEncoder(make([]byte, 4096))
	for tag, seq := range []uint64{1: one, 2: two} {
		if tag == 0 {
			continue
		}
		rec, err := enc.Reserve(ControlTag, 0, RecordLen)
		require.NoError(t, err)
		putRecord((*[RecordLen]byte)(rec), RecordSync, uint64(tag), seq)
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
	assert.Equal(t, uint64(3), s.Stats().Messages, "the messages delivered before the change stay counted")
}

// A tag unsubscribed and subscribed again in the middle of a run (its
// receive state replaced, its numbering restarted) goes on in the new
// state: the rest of the buffer is delivered and counted there, and what
// the old state delivered stays counted in it.
func TestOnDataRunGoesOnWhenTagResubscribed(t *testing.T) {
	var s *Subscriber
	var got []uint64
	var old, fresh *recvTag
	s = runsSubscriber(func(m Message) {
		got = append(got, m.Seq)
		if m.Tag == 1 && m.Seq == 1 { // as Unsubscribe(1) then Subscribe(1) do, under s.mu
			m := maps.Clone(*s.tags.Load())
			old, fresh = m[1], &recvTag{tag: 1, gen: 1, synced: true, next: 100}
			m[1] = fresh
			s.tags.Store(&m)
			s.tagsVer.Add(1)
		}
	})
	s.onData(nil, runsBuffer(t))
	assert.Equal(t, []uint64{0, 1, 100, 101, 102, 0, 103, 104}, got, "tag 1 numbered on from 100 in the new state")
	require.NotNil(t, old)
	assert.Equal(t, uint64(2), old.messages.Load(), "the old state's two")
	one, ok := s.TagStats(1)
	require.True(t, ok)
	assert.Equal(t, TagStats{Messages: 5, Bytes: 5, NextSeq: 105}, one, "the new state's five")
	assert.Equal(t, uint64(8), s.Stats().Messages)
	assert.Zero(t, s.Stats().Unsolicited)
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

// tagSlot reaches every entry of the tag cache and none beyond it.
func TestTagSlotCoversTheCache(t *testing.T) {
	var hit [tagCacheSize]bool
	for tag := range uint64(16 * tagCacheSize) {
		slot := tagSlot(tag)
		require.Less(t, slot, uint64(tagCacheSize), "tag %d", tag)
		hit[slot] = true
	}
	for slot, ok := range hit {
		assert.True(t, ok, "slot %d never used", slot)
	}
}

// Two subscribed tags that share an entry of the tag cache take turns in
// a buffer: each message is numbered and counted under its own tag.
func TestOnDataTagsSharingACacheEntry(t *testing.T) {
	a, b := uint64(1), uint64(2)
	for tagSlot(b) != tagSlot(a) {
		b++
	}
	enc := coalesce.NewEncoder(make([]byte, 4096))
	for _, tag := range []uint64{a, b} {
		rec, err := enc.Reserve(ControlTag, 0, RecordLen)
		require.NoError(t, err)
		putRecord((*[RecordLen]byte)(rec), RecordSync, tag, 10)
	}
	order := []uint64{a, b, a, a, b, a, b, b, b}
	for i, tag := range order {
		require.NoError(t, enc.Append(tag, 0, []byte{byte(i), 0}))
	}
	got := map[uint64][]uint64{}
	s := &Subscriber{cfg: SubscriberConfig{OnMessage: func(m Message) { got[m.Tag] = append(got[m.Tag], m.Seq) }}}
	tags := map[uint64]*recvTag{a: {tag: a, gen: 1, synced: true, next: 10}, b: {tag: b, gen: 1, synced: true, next: 10}}
	s.tags.Store(&tags)
	s.lastConn = &dataConn{gen: 1, pub: "p"}
	s.onData(nil, enc.Bytes())
	assert.Equal(t, map[uint64][]uint64{a: {10, 11, 12, 13}, b: {10, 11, 12, 13, 14}}, got)
	sa, _ := s.TagStats(a)
	sb, _ := s.TagStats(b)
	assert.Equal(t, TagStats{Messages: 4, Bytes: 8, NextSeq: 14}, sa)
	assert.Equal(t, TagStats{Messages: 5, Bytes: 10, NextSeq: 15}, sb)
	assert.Equal(t, SubscriberStats{Buffers: 1, Messages: 9, Bytes: 18}, s.Stats())
}

// The message counters TagStats and Stats read take a buffer's messages
// once the buffer is done, every tag's at once: a reader inside the buffer
// (here OnMessage) sees the buffers before it whole, and none of this one.
// What a record or a status counts (NextSeq at a SYNC record, Gaps,
// Missed, Flagged) it sees at once.
func TestOnDataCountsPerBuffer(t *testing.T) {
	type view struct{ tagMsgs, msgs, next, gaps, missed, flagged uint64 }
	var s *Subscriber
	var seen []view
	s = runsSubscriber(func(m Message) {
		one, _ := s.TagStats(1)
		two, _ := s.TagStats(2)
		seen = append(seen, view{one.Messages + two.Messages, s.Stats().Messages, one.NextSeq, one.Gaps, one.Missed, two.Flagged})
	})
	s.onData(nil, runsBuffer(t))
	require.Len(t, seen, 8)
	for i, v := range seen {
		want := view{flagged: min(uint64(i/5), 1)} // tag 2's message is the sixth
		assert.Equal(t, want, v, "message %d of the first buffer: nothing of it counted but its status", i)
	}
	seen = nil
	s.onData(nil, runsBufferFrom(t, 20, 1)) // tag 1 jumps from 7 to 20: a gap of 13
	require.Len(t, seen, 8)
	for i, v := range seen {
		want := view{tagMsgs: 8, msgs: 8, next: 20, gaps: 1, missed: 13, flagged: 1 + min(uint64(i/5), 1)}
		assert.Equal(t, want, v, "message %d of the second buffer: the first whole, the SYNC record and the status at once", i)
	}
	assert.Equal(t, SubscriberStats{Buffers: 2, Messages: 16, Bytes: 16, Gaps: 1, Missed: 13}, s.Stats())
	one, _ := s.TagStats(1)
	assert.Equal(t, uint64(27), one.NextSeq, "the second buffer's seven messages of tag 1 once it is done")
}
