package pubsub

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// The subscription protocol, version 1 (docs/wire.md, "Publish/subscribe").
//
// Control: one JSON object per line (LF-terminated, at most MaxLineBytes
// including the LF) over a plain TCP connection from the subscriber to the
// publisher's subscription port. Data: the coalesced format of package
// coalesce over a libfabric connection the publisher dials to the
// subscriber, with control records (HELLO, SYNC, START) as messages of
// ControlTag.
const (
	// ProtocolVersion is the version of the subscription protocol this
	// package speaks, carried as "v" in every control message and as the
	// fourth byte of every control record.
	ProtocolVersion = 1
	// MaxLineBytes bounds one control message, LF included. A longer line
	// is refused as malformed.
	MaxLineBytes = 1 << 20
	// MaxTagsPerRequest bounds the tags of one subscribe or unsubscribe
	// request, so that the request and its ack fit in MaxLineBytes with
	// every number at its longest (20 digits): the ack of a subscribe
	// carries two numbers per tag (tags and next), 42 bytes at most. A
	// Subscriber sends more tags in several requests.
	MaxTagsPerRequest = 16384
	// ControlTag is the tag reserved for control records on the data
	// connection (HELLO, SYNC, START). A publisher refuses to serve it. A reader of
	// the plain coalesced format sees control records as messages of this
	// tag and may skip them.
	ControlTag = ^uint64(0)
	// RecordLen is the payload length of a control record.
	RecordLen = 24
	// MaxNumberingLen bounds the numbering name a publisher gives in the
	// ack of a hello (PublisherConfig.Numbering), in bytes.
	MaxNumberingLen = 256
)

// Control message operations.
const (
	OpHello       = "hello"
	OpSubscribe   = "subscribe"
	OpUnsubscribe = "unsubscribe"
	OpAck         = "ack"
	OpError       = "error"
)

// Policy names on the wire.
const (
	policyBlock = "block"
	policyDrop  = "drop"
)

// ErrMalformed is matched by every error of ParseRequest, ParseResponse
// and ParseRecord.
var ErrMalformed = errors.New("pubsub: malformed control message")

// Request is a control message from a subscriber to a publisher.
type Request struct {
	// V is the protocol version, ProtocolVersion.
	V int `json:"v"`
	// Op is OpHello, OpSubscribe or OpUnsubscribe.
	Op string `json:"op"`
	// ID is chosen by the subscriber (1 or more) and echoed in the answer.
	ID uint64 `json:"id"`
	// Data (hello) is the subscriber's data address, "IP:PORT": the
	// libfabric listener the publisher dials.
	Data string `json:"data,omitempty"`
	// Token (hello) is a non-zero number the publisher echoes in the HELLO
	// record that opens the data connection.
	Token uint64 `json:"token,omitempty"`
	// BufferSize (hello) is the size of the subscriber's receive buffers:
	// the publisher refuses the hello when its send buffers are larger.
	BufferSize int `json:"bufsize,omitempty"`
	// Policy (hello, optional) asks for "block" or "drop".
	Policy string `json:"policy,omitempty"`
	// Tags (subscribe, unsubscribe) are the tags concerned.
	Tags []uint64 `json:"tags,omitempty"`
}

// Response is a control message from a publisher to a subscriber.
type Response struct {
	// V is the protocol version, ProtocolVersion.
	V int `json:"v"`
	// Op is OpAck or OpError.
	Op string `json:"op"`
	// ID is the ID of the request answered; 0 when the request could not
	// be parsed.
	ID uint64 `json:"id"`
	// Instance (ack of hello) identifies the publisher process: a
	// different value after a restart.
	Instance uint64 `json:"instance,omitempty"`
	// Policy (ack of hello) is the policy the publisher applies.
	Policy string `json:"policy,omitempty"`
	// Numbering (ack of hello, optional) names the numbering the
	// publisher's sequence numbers follow (PublisherConfig.Numbering):
	// publishers that give the same name number each tag alike, so a
	// subscriber that moves a tag between them goes on counting. Empty:
	// the publisher's own, named by its subscription address.
	Numbering string `json:"numbering,omitempty"`
	// Tags (ack of subscribe or unsubscribe) are the tags done.
	Tags []uint64 `json:"tags,omitempty"`
	// Next (ack of subscribe) is, for each of Tags in the same order, the
	// sequence number of the tag's first message for this subscription:
	// the subscriber counts from it, so that what it misses before any
	// SYNC record reaches it (a connection lost at once) is a gap too.
	Next []uint64 `json:"next,omitempty"`
	// Refused (ack of subscribe) are the tags the publisher does not serve.
	Refused []uint64 `json:"refused,omitempty"`
	// Error (error) says why the request was refused.
	Error string `json:"error,omitempty"`
}

// ParseRequest parses and checks one control line from a subscriber (with
// or without its LF). Every error matches ErrMalformed; the returned
// Request then carries the ID when one could be read, for the answer.
func ParseRequest(line []byte) (Request, error) {
	var r Request
	if err := parseLine(line, &r); err != nil {
		return Request{ID: r.ID}, err
	}
	if r.V != ProtocolVersion {
		return r, fmt.Errorf("%w: unsupported version %d (this side speaks %d)", ErrMalformed, r.V, ProtocolVersion)
	}
	if r.ID == 0 {
		return r, fmt.Errorf("%w: missing id", ErrMalformed)
	}
	switch r.Op {
	case OpHello:
		if _, _, err := splitDataAddr(r.Data); err != nil {
			return r, fmt.Errorf("%w: hello: data %q: %v", ErrMalformed, r.Data, err)
		}
		if r.Token == 0 {
			return r, fmt.Errorf("%w: hello: missing token", ErrMalformed)
		}
		if r.BufferSize <= 0 {
			return r, fmt.Errorf("%w: hello: missing or negative bufsize", ErrMalformed)
		}
		if r.Policy != "" && r.Policy != policyBlock && r.Policy != policyDrop {
			return r, fmt.Errorf("%w: hello: unknown policy %q", ErrMalformed, r.Policy)
		}
		if r.Tags != nil {
			return r, fmt.Errorf("%w: hello carries tags", ErrMalformed)
		}
	case OpSubscribe, OpUnsubscribe:
		if len(r.Tags) == 0 {
			return r, fmt.Errorf("%w: %s without tags", ErrMalformed, r.Op)
		}
		if len(r.Tags) > MaxTagsPerRequest {
			return r, fmt.Errorf("%w: %s of %d tags (at most %d)", ErrMalformed, r.Op, len(r.Tags), MaxTagsPerRequest)
		}
		if r.Data != "" || r.Token != 0 || r.BufferSize != 0 || r.Policy != "" {
			return r, fmt.Errorf("%w: %s carries hello fields", ErrMalformed, r.Op)
		}
	default:
		return r, fmt.Errorf("%w: unknown op %q", ErrMalformed, r.Op)
	}
	return r, nil
}

// ParseResponse parses and checks one control line from a publisher. Every
// error matches ErrMalformed.
func ParseResponse(line []byte) (Response, error) {
	var r Response
	if err := parseLine(line, &r); err != nil {
		return Response{}, err
	}
	// One representation of "no tags": an empty list means what no list
	// does, and what Marshal (omitempty) writes for it.
	if len(r.Tags) == 0 {
		r.Tags = nil
	}
	if len(r.Refused) == 0 {
		r.Refused = nil
	}
	if len(r.Next) == 0 {
		r.Next = nil
	}
	if r.V != ProtocolVersion {
		return r, fmt.Errorf("%w: unsupported version %d (this side speaks %d)", ErrMalformed, r.V, ProtocolVersion)
	}
	switch r.Op {
	case OpAck:
		if r.ID == 0 {
			return r, fmt.Errorf("%w: ack without id", ErrMalformed)
		}
		if r.Error != "" {
			return r, fmt.Errorf("%w: ack carries an error", ErrMalformed)
		}
		if r.Policy != "" && r.Policy != policyBlock && r.Policy != policyDrop {
			return r, fmt.Errorf("%w: ack: unknown policy %q", ErrMalformed, r.Policy)
		}
		if len(r.Numbering) > MaxNumberingLen {
			return r, fmt.Errorf("%w: ack: numbering of %d bytes (at most %d)", ErrMalformed, len(r.Numbering), MaxNumberingLen)
		}
		if len(r.Tags) > MaxTagsPerRequest || len(r.Refused) > MaxTagsPerRequest {
			return r, fmt.Errorf("%w: ack of too many tags", ErrMalformed)
		}
		if r.Next != nil && len(r.Next) != len(r.Tags) {
			return r, fmt.Errorf("%w: ack with %d next numbers for %d tags", ErrMalformed, len(r.Next), len(r.Tags))
		}
	case OpError:
		if r.Error == "" {
			return r, fmt.Errorf("%w: error without text", ErrMalformed)
		}
	default:
		return r, fmt.Errorf("%w: unknown op %q", ErrMalformed, r.Op)
	}
	return r, nil
}

// parseLine decodes one JSON object, alone on its line, into v.
func parseLine(line []byte, v any) error {
	if len(line) > MaxLineBytes {
		return fmt.Errorf("%w: line of %d bytes (at most %d)", ErrMalformed, len(line), MaxLineBytes)
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if bytes.IndexByte(line, '\n') >= 0 {
		return fmt.Errorf("%w: more than one line", ErrMalformed)
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() || dec.InputOffset() != int64(len(trimmed)) {
		return fmt.Errorf("%w: trailing data after the object", ErrMalformed)
	}
	return nil
}

// appendLine appends v as one JSON line.
func appendLine(b []byte, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil { // plain structs of numbers and strings: cannot happen
		panic(err)
	}
	return append(append(b, j...), '\n')
}

// splitDataAddr checks a data address, "IP:PORT" with a literal IP and a
// port in 1..65535, and returns its parts.
func splitDataAddr(addr string) (net.IP, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, 0, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, 0, errors.New("host is not a literal IP address")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, 0, errors.New("port outside 1..65535")
	}
	return ip, int(p), nil
}

// RecordKind says what a control record on the data connection is.
type RecordKind uint8

// Control record kinds.
const (
	// RecordHello opens a data connection: A is the subscriber's token
	// from its hello, B the publisher's instance.
	RecordHello RecordKind = 1
	// RecordSync gives a tag's sequence number: A is the tag, B the
	// sequence number of the next message of that tag on this connection.
	RecordSync RecordKind = 2
	// RecordStart is RecordSync as the first record of a subscription: B
	// is the number of the subscription's first message. On a connection
	// that carried an earlier subscription of the tag it starts the count
	// afresh, so the messages published between the two subscriptions are
	// not taken for a gap.
	RecordStart RecordKind = 3
)

// recordMagic opens every control record: "NPS" and the protocol version.
var recordMagic = [4]byte{'N', 'P', 'S', ProtocolVersion}

// Record is a control record: the payload of a message of ControlTag on
// the data connection.
type Record struct {
	Kind RecordKind
	A, B uint64
}

// putRecord writes r's RecordLen bytes into b.
func putRecord(b *[RecordLen]byte, kind RecordKind, a, v uint64) {
	copy(b[:4], recordMagic[:])
	b[4], b[5], b[6], b[7] = byte(kind), 0, 0, 0
	binary.LittleEndian.PutUint64(b[8:], a)
	binary.LittleEndian.PutUint64(b[16:], v)
}

// AppendRecord appends the RecordLen bytes of r to b.
func AppendRecord(b []byte, r Record) []byte {
	var p [RecordLen]byte
	putRecord(&p, r.Kind, r.A, r.B)
	return append(b, p[:]...)
}

// Record parse failures; parseRecord returns them without allocating.
var (
	errRecordLen   = fmt.Errorf("%w: control record is not %d bytes", ErrMalformed, RecordLen)
	errRecordMagic = fmt.Errorf("%w: control record magic or version", ErrMalformed)
	errRecordPad   = fmt.Errorf("%w: control record padding not zero", ErrMalformed)
	errRecordKind  = fmt.Errorf("%w: unknown control record kind", ErrMalformed)
)

// ParseRecord parses the payload of a message of ControlTag. Every error
// matches ErrMalformed. It does not allocate.
func ParseRecord(p []byte) (Record, error) {
	if len(p) != RecordLen {
		return Record{}, errRecordLen
	}
	if [4]byte(p[:4]) != recordMagic {
		return Record{}, errRecordMagic
	}
	if p[5]|p[6]|p[7] != 0 {
		return Record{}, errRecordPad
	}
	r := Record{Kind: RecordKind(p[4]), A: binary.LittleEndian.Uint64(p[8:]), B: binary.LittleEndian.Uint64(p[16:])}
	if r.Kind != RecordHello && r.Kind != RecordSync && r.Kind != RecordStart {
		return Record{}, errRecordKind
	}
	return r, nil
}
