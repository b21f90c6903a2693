package pubsub_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/netio-go/netio/pubsub"
)

// FuzzParseRequest feeds arbitrary lines to the publisher's parser of
// control requests. It must never panic; an error must match
// ErrMalformed; a request it accepts must survive a round trip through
// JSON unchanged (what the parser accepts is what the fields say).
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"hello","id":1,"data":"10.0.0.2:40000","token":8237498237,"bufsize":65536,"policy":"drop"}`,
		`{"v":1,"op":"subscribe","id":2,"tags":[1,2,18446744073709551615]}`,
		`{"v":1,"op":"unsubscribe","id":3,"tags":[7]}` + "\n",
		`{"v":1,"op":"hello","id":1,"data":"[fe80::1%eth0]:1","token":1,"bufsize":1}`,
		`{"v":1,"op":"subscribe","id":1,"tags":[1e3]}`, `{"V":1,"OP":"subscribe","ID":1,"TAGS":[1]}`,
		"", "{", "\x00", `{"v":1,"op":"subscribe","id":1,"tags":[1]}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := pubsub.ParseRequest(line)
		if err != nil {
			if !errors.Is(err, pubsub.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := pubsub.ParseRequest(b)
		if err != nil {
			t.Fatalf("re-encoded request %s refused: %v", b, err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip changed %+v into %+v", r, r2)
		}
	})
}

// FuzzParseResponse does the same for the subscriber's parser of answers.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"ack","id":1,"instance":12,"policy":"block"}`,
		`{"v":1,"op":"ack","id":1,"instance":12,"numbering":"link-7"}`,
		`{"v":1,"op":"ack","id":2,"tags":[1],"refused":[3]}`,
		`{"v":1,"op":"ack","id":2,"tags":[1,2],"next":[0,17],"refused":[3]}`,
		`{"v":1,"op":"error","id":0,"error":"x"}`, "", "[]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := pubsub.ParseResponse(line)
		if err != nil {
			if !errors.Is(err, pubsub.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := pubsub.ParseResponse(b)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip of %+v: %+v, %v", r, r2, err)
		}
	})
}

// FuzzParseRecord feeds arbitrary payloads to the subscriber's parser of
// control records: a record it accepts re-encodes to exactly its input.
func FuzzParseRecord(f *testing.F) {
	f.Add(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordHello, A: 1, B: 2}))
	f.Add(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordSync, A: 42, B: 1000}))
	f.Add(pubsub.AppendRecord(nil, pubsub.Record{Kind: pubsub.RecordStart, A: 42, B: 1000}))
	f.Add([]byte("NPS\x01"))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := pubsub.ParseRecord(p)
		if err != nil {
			if !errors.Is(err, pubsub.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if b := pubsub.AppendRecord(nil, r); !bytes.Equal(b, p) {
			t.Fatalf("record %+v re-encodes to %x, input %x", r, b, p)
		}
	})
}

// FuzzParseDirectoryEntry feeds arbitrary file contents to the directory
// bus's parser (the files come from other hosts): it never panics, every
// error matches ErrMalformed, and an entry it accepts survives a round
// trip through its own JSON.
func FuzzParseDirectoryEntry(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"id":"ros-17-4242-7001","addr":"10.0.0.1:7001","tags":[1,2,3],"host":"ros-17","pid":4242,"started":"2026-11-30T10:00:00.123Z"}`,
		`{"v":1,"id":"ros-17-4242-7001","addr":"10.0.0.1","tags":[1]}`, `{"v":2}`, "", "[]", "null",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const id = "ros-17-4242-7001"
		e, err := pubsub.ParseDirectoryEntry(id, b)
		if err != nil {
			if !errors.Is(err, pubsub.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		j, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := pubsub.ParseDirectoryEntry(id, j)
		if err == nil && e2.Started.Equal(e.Started) {
			e2.Started = e.Started // the same instant; a fixed zone is a new *Location each parse
		}
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip of %+v: %+v, %v", e, e2, err)
		}
	})
}
