package pubsub

import (
	"github.com/netio-go/netio/coalesce"
	"github.com/netio-go/netio/endpoint"
)

// The data path: everything here runs on the data listener's poller
// goroutine, one buffer at a time.

// onData decodes one received buffer: control records, then messages of
// subscribed tags, in order. A message that goes on with the tag of the
// one before, without a status (a run, as coalescing makes them), is
// parsed by the decoder's inlined NextPlain and, while the subscribed tags
// have not changed, goes straight to delivery: the checks of start hold
// for the whole run.
func (s *Subscriber) onData(ep *endpoint.ReceiveEndpoint, buf []byte) {
	s.st.buffers.Add(1)
	dc := s.lastConn
	if ep != s.lastEP {
		dc = s.conns[ep]
		s.lastEP, s.lastConn = ep, dc
	}
	if dc == strayed {
		return // closed as stray: what it had placed before the close is ignored
	}
	cb := s.cfg.OnMessage
	var d coalesce.Decoder // on the stack: its stores per message need no write barrier
	d.Reset(buf)
	for d.Next() {
		tag := d.Tag()
		if tag == ControlTag {
			if dc = s.record(ep, dc, d.Data()); dc == nil {
				s.flushCounts()
				return // not a publisher of ours: closed
			}
			continue
		}
		if dc == nil {
			s.strayConn(ep)
			return
		}
		run, ver := s.start(dc, tag) // ver: the version of the tags run was looked up in
		if run != nil {
			data, status := d.Data(), d.Status()
			seq := run.take(data)
			if status != 0 {
				run.flag(status)
			}
			if cb != nil {
				cb(Message{Tag: tag, Seq: seq, Status: status, Data: data, Publisher: dc.pub})
			}
		}
		m := Message{Tag: tag, Publisher: dc.pub} // a run's messages differ in Seq and Data
		for d.NextPlain() {
			if s.tagsVer.Load() != ver { // and always while run is nil: start gave noRun
				if run, ver = s.start(dc, tag); run == nil {
					continue
				}
			}
			m.Data = d.Data()
			m.Seq = run.take(m.Data)
			if cb != nil {
				cb(m)
			}
		}
	}
	s.flushCounts()
	if err := d.Err(); err != nil {
		s.st.malformed.Add(1)
		pub := ""
		if dc != nil {
			pub = dc.pub
		}
		s.log.Warn().Err(err).Str("publisher", pub).Msg("pubsub: malformed buffer; its valid prefix was delivered")
	}
	if dc != nil && s.cfg.OnBuffer != nil {
		s.cfg.OnBuffer(dc.pub, buf)
	}
}

// take numbers and counts a message of rt carrying data, in plain fields
// that flushCounts publishes, and returns its sequence number.
func (rt *recvTag) take(data []byte) uint64 {
	seq := rt.next
	rt.next++
	rt.pendMsgs++
	rt.pendBytes += uint64(len(data))
	return seq
}

// noRun is the tags' version start returns with no receive state: never
// one of Subscriber.tagsVer's, so that a run's check of the version sends
// every message of an unsubscribed tag back to start.
const noRun = ^uint64(0)

// start begins a run of messages of tag on dc: it returns the tag's
// receive state, listed for flushCounts to bring its counters up to date
// at the end of the buffer, and the version of the tags it was found in;
// or nil and noRun when the tag is not subscribed on this connection (the
// message is counted unsolicited and dropped).
func (s *Subscriber) start(dc *dataConn, tag uint64) (*recvTag, uint64) {
	rt, ver := s.lookup(tag)
	if rt == nil || rt.gen != dc.gen {
		s.st.unsolicited.Add(1)
		return nil, noRun
	}
	if !rt.dirty {
		rt.dirty = true
		s.dirty = append(s.dirty, rt) // grows to the most tags a buffer has seen, then stays
	}
	return rt, ver
}

// flag counts a message of rt with a non-zero status.
func (rt *recvTag) flag(status uint8) {
	rt.flagged.Add(1)
	for i := range rt.bits {
		if status&(1<<i) != 0 {
			rt.bits[i].Add(1)
		}
	}
}

// setNext sets the number of rt's next message.
func (rt *recvTag) setNext(seq uint64) {
	rt.next = seq
	rt.expect.Store(seq)
}

// record handles a control record and returns the connection's state
// (nil after closing a connection that is not a publisher's of ours).
func (s *Subscriber) record(ep *endpoint.ReceiveEndpoint, dc *dataConn, p []byte) *dataConn {
	r, err := ParseRecord(p)
	if err != nil {
		s.st.badRecords.Add(1)
		if dc == nil {
			s.strayConn(ep)
		}
		return dc
	}
	switch r.Kind {
	case RecordHello:
		if dc != nil {
			s.st.badRecords.Add(1) // a second HELLO: ignored
			return dc
		}
		s.tokMu.Lock()
		ti, ok := s.tokens[r.A]
		s.tokMu.Unlock()
		if !ok {
			s.strayConn(ep)
			return nil
		}
		dc = &dataConn{sess: ti.sess, gen: ti.gen, pub: ti.sess.addr, instance: r.B, stream: ti.stream}
		s.conns[ep] = dc
		s.lastEP, s.lastConn = ep, dc
		return dc
	case RecordSync, RecordStart:
		if dc == nil {
			s.strayConn(ep)
			return nil
		}
		s.sync(dc, r.A, r.B, r.Kind == RecordStart)
	}
	return dc
}

// sync applies a SYNC record: seq is the number of the tag's next
// message on this connection. Behind the count it is a fault
// (OutOfSequence), ahead of it a gap. A START record on the connection
// the tag is counted on already begins a new subscription there (the tag
// was unsubscribed and subscribed again, and the records before were its
// earlier subscription's): the count starts afresh. A record on another
// connection may move the count there (follow).
func (s *Subscriber) sync(dc *dataConn, tag, seq uint64, start bool) {
	rt, _ := s.lookup(tag)
	if rt == nil {
		return // not subscribed
	}
	if dc.gen != rt.gen {
		s.follow(rt, dc, seq, start)
		return
	}
	if start {
		rt.setNext(seq)
		return
	}
	exp := rt.next
	switch {
	case seq > exp:
		s.gap(dc, rt, exp, seq-exp)
	case seq < exp:
		rt.outOfSeq.Add(1)
		s.st.outOfSeq.Add(1)
	}
	rt.setNext(seq)
}

// gap reports count messages of rt missed from first on.
func (s *Subscriber) gap(dc *dataConn, rt *recvTag, first, count uint64) {
	rt.gaps.Add(1)
	rt.missed.Add(count)
	s.st.gaps.Add(1)
	s.st.missed.Add(count)
	if cb := s.cfg.OnGap; cb != nil {
		cb(Gap{Publisher: dc.pub, Tag: rt.tag, First: first, Count: count})
	}
}

// strayed marks, in Subscriber.conns, a data connection closed as stray
// until its OnConnectionClosed: a connection closed from OnData still
// delivers the buffers the provider placed before the close
// (endpoint.ReceiveEndpoint.Close), which are ignored, so that it is
// counted and logged once.
var strayed = &dataConn{}

// strayConn closes a data connection that did not open with the HELLO
// record of one of our control connections.
func (s *Subscriber) strayConn(ep *endpoint.ReceiveEndpoint) {
	s.st.stray.Add(1)
	s.log.Warn().Str("from", ep.LocalAddr()).Msg("pubsub: data connection without a known HELLO record: closed")
	if s.lastEP == ep {
		s.lastEP, s.lastConn = nil, nil
	}
	s.conns[ep] = strayed
	_ = ep.Close()
}

// onConnClosed forgets a data connection; if it was its publisher's
// current one, the control connection is closed too, and the session
// starts over.
func (s *Subscriber) onConnClosed(ep *endpoint.ReceiveEndpoint, err error) {
	dc := s.conns[ep]
	delete(s.conns, ep)
	if s.lastEP == ep {
		s.lastEP, s.lastConn = nil, nil
	}
	if dc != nil && dc != strayed {
		dc.sess.breakGen(dc.gen)
	}
}
