package pubsub_test

import (
	"bufio"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/pubsub"
)

// TestParseRequest checks the requests docs/wire.md shows and some it
// refuses.
func TestParseRequest(t *testing.T) {
	good := map[string]pubsub.Request{
		`{"v":1,"op":"hello","id":1,"data":"10.0.0.2:40000","token":8237498237,"bufsize":65536}`: {
			V: 1, Op: "hello", ID: 1, Data: "10.0.0.2:40000", Token: 8237498237, BufferSize: 65536},
		`{"v":1,"op":"hello","id":1,"data":"[::1]:5","token":1,"bufsize":1,"policy":"drop","future":true}`: {
			V: 1, Op: "hello", ID: 1, Data: "[::1]:5", Token: 1, BufferSize: 1, Policy: "drop"},
		`{"v":1,"op":"subscribe","id":2,"tags":[1,18446744073709551614]}` + "\n": {
			V: 1, Op: "subscribe", ID: 2, Tags: []uint64{1, 18446744073709551614}},
		` {"op":"unsubscribe","v":1,"id":3,"tags":[7]} `: {V: 1, Op: "unsubscribe", ID: 3, Tags: []uint64{7}},
	}
	for line, want := range good {
		got, err := pubsub.ParseRequest([]byte(line))
		if assert.NoError(t, err, line) {
			assert.Equal(t, want, got, line)
		}
	}
	bad := []string{
		``, `{}`, `null`, `"x"`, `{"v":1}`, `{"v":1,"op":"hello"}`,
		`{"v":1,"op":"subscribe","tags":[1]}`, // no id
		`{"v":1,"op":"hello","id":1,"data":"10.0.0.2","token":1,"bufsize":1}`,
		`{"v":1,"op":"hello","id":1,"data":"host:1","token":1,"bufsize":1}`,
		`{"v":1,"op":"hello","id":1,"data":"1.2.3.4:0","token":1,"bufsize":1}`,
		`{"v":1,"op":"hello","id":1,"data":"1.2.3.4:1","token":0,"bufsize":1}`,
		`{"v":1,"op":"hello","id":1,"data":"1.2.3.4:1","token":1,"bufsize":-1}`,
		`{"v":1,"op":"hello","id":1,"data":"1.2.3.4:1","token":1,"bufsize":1,"policy":"maybe"}`,
		`{"v":1,"op":"hello","id":1,"data":"1.2.3.4:1","token":1,"bufsize":1,"tags":[1]}`,
		`{"v":1,"op":"subscribe","id":1,"tags":[1],"token":5}`,
		`{"v":1,"op":"subscribe","id":1,"tags":"1"}`,
		`{"v":1,"op":"subscribe","id":1,"tags":[1]}` + "\n" + `{"v":1}`,
		`{"v":1,"op":"subscribe","id":1,"tags":[1]}x`,
	}
	for _, line := range bad {
		_, err := pubsub.ParseRequest([]byte(line))
		assert.ErrorIs(t, err, pubsub.ErrMalformed, "%q", line)
	}
	// The ID of a request refused for its content is kept, for the answer.
	r, err := pubsub.ParseRequest([]byte(`{"v":1,"op":"jump","id":9}`))
	assert.ErrorIs(t, err, pubsub.ErrMalformed)
	assert.Equal(t, uint64(9), r.ID)
}

// TestParseResponse checks the answers docs/wire.md shows and some it
// refuses.
func TestParseResponse(t *testing.T) {
	good := map[string]pubsub.Response{
		`{"v":1,"op":"ack","id":1,"instance":12,"policy":"block"}`:           {V: 1, Op: "ack", ID: 1, Instance: 12, Policy: "block"},
		`{"v":1,"op":"ack","id":1,"instance":12,"numbering":"link-7"}`:       {V: 1, Op: "ack", ID: 1, Instance: 12, Numbering: "link-7"},
		`{"v":1,"op":"ack","id":2,"tags":[1],"refused":[3]}`:                 {V: 1, Op: "ack", ID: 2, Tags: []uint64{1}, Refused: []uint64{3}},
		`{"v":1,"op":"ack","id":2,"tags":[1,2],"next":[0,17],"refused":[3]}`: {V: 1, Op: "ack", ID: 2, Tags: []uint64{1, 2}, Next: []uint64{0, 17}, Refused: []uint64{3}},
		`{"v":1,"op":"error","id":0,"error":"malformed: not JSON"}` + "\n":   {V: 1, Op: "error", Error: "malformed: not JSON"},
	}
	for line, want := range good {
		got, err := pubsub.ParseResponse([]byte(line))
		if assert.NoError(t, err, line) {
			assert.Equal(t, want, got, line)
		}
	}
	for _, line := range []string{`{"v":1,"op":"ack"}`, `{"v":1,"op":"error","id":1}`, `{"v":0,"op":"ack","id":1}`,
		`{"v":1,"op":"ack","id":1,"error":"x"}`, `{"v":1,"op":"nack","id":1}`, `{"v":1,"op":"ack","id":1,"policy":"x"}`,
		`{"v":1,"op":"ack","id":2,"tags":[1,2],"next":[0]}`, `{"v":1,"op":"ack","id":2,"next":[5]}`,
		`{"v":1,"op":"ack","id":1,"numbering":"` + strings.Repeat("n", pubsub.MaxNumberingLen+1) + `"}`} {
		_, err := pubsub.ParseResponse([]byte(line))
		assert.ErrorIs(t, err, pubsub.ErrMalformed, line)
	}
}

// dataExample is the worked example of docs/wire.md: the start of a data
// connection as a publisher writes it.
func dataExample(t *testing.T) []byte {
	e := coalesce.NewEncoder(make([]byte, 256))
	require.NoError(t, e.Append(pubsub.ControlTag, 0, pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordHello, A: 0x77, B: 0x1122334455667788})))
	require.NoError(t, e.Append(pubsub.ControlTag, 0, pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordStart, A: 42, B: 1000})))
	require.NoError(t, e.Append(pubsub.ControlTag, 0, pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordSync, A: 42, B: 1000})))
	require.NoError(t, e.Append(42, 0, []byte("first")))
	require.NoError(t, e.Append(42, pubsub.StatusFirmwareCRC, []byte("second")))
	return e.Bytes()
}

func TestDataExampleMatchesWireSpec(t *testing.T) {
	assert.Equal(t, dataExample(t), readGolden(t, "../docs/wire.md", "golden-pubsub"),
		"the hex dump in docs/wire.md must be what a publisher writes")
	r, err := pubsub.ParseRecord(dataExample(t)[12:36])
	require.NoError(t, err)
	assert.Equal(t, pubsub.Record{Kind: pubsub.RecordHello, A: 0x77, B: 0x1122334455667788}, r)
}

func TestParseRecord(t *testing.T) {
	rec := pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordSync, A: 1, B: 2})
	for _, bad := range [][]byte{nil, rec[:23], append(rec[:24:24], 0),
		append([]byte("NPS\x02"), rec[4:]...), append([]byte("NPT\x01"), rec[4:]...)} {
		_, err := pubsub.ParseRecord(bad)
		assert.ErrorIs(t, err, pubsub.ErrMalformed)
	}
	for _, i := range []int{4, 5, 6, 7} {
		b := append([]byte(nil), rec...)
		b[i] = 9
		_, err := pubsub.ParseRecord(b)
		assert.ErrorIs(t, err, pubsub.ErrMalformed, "byte %d", i)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = pubsub.ParseRecord(rec[:3]) }))
}

// readGolden returns the bytes of the hexdump -C block between the
// "<!-- name:begin" and "<!-- name:end" markers of the file at path.
func readGolden(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []byte
	inside := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- "+name+":begin"):
			inside = true
		case strings.HasPrefix(line, "<!-- "+name+":end"):
			return out
		case inside && len(line) > 10 && line[8] == ' ':
			hexPart, _, _ := strings.Cut(line[10:], "|")
			b, err := hex.DecodeString(strings.Join(strings.Fields(hexPart), ""))
			require.NoError(t, err, "line %q", line)
			out = append(out, b...)
		}
	}
	require.NoError(t, sc.Err())
	require.Fail(t, "no "+name+" block in "+path)
	return nil
}
