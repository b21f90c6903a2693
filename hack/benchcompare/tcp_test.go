package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMsgConnCarriesLengthPrefixedMessages(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		frame := newFrame(5)
		copy(frame[lenPrefix:], "hello")
		var lens []int
		var got []byte
		err := overTCP(t.Context(), buffered, 30*time.Second,
			func(m *msgConn) error {
				buf := newFrame(16)
				for {
					n, err := m.receive(buf)
					if err != nil {
						return err // io.EOF after the close: the test sees it
					}
					lens = append(lens, n)
					if n == 5 {
						got = append([]byte(nil), buf[:lenPrefix+n]...)
					}
				}
			},
			func(m *msgConn) error {
				if err := m.send(frame); err != nil {
					return err
				}
				if err := m.send(newFrame(0)); err != nil {
					return err
				}
				return m.flush()
			})
		assert.ErrorIs(t, err, io.EOF, "the server ends at the close, between messages")
		assert.Equal(t, []int{5, 0}, lens)
		assert.Equal(t, frame, got, "prefix and payload, ready to echo")
	}
}

func TestMsgConnRejectsOversizeMessage(t *testing.T) {
	var wire bytes.Buffer
	_ = binary.Write(&wire, binary.LittleEndian, uint32(1000))
	m := &msgConn{r: &wire}
	_, err := m.receive(newFrame(10))
	assert.ErrorContains(t, err, "message of 1000 bytes, buffer of 10")
}

func TestTCPBandwidthCountsEveryMessage(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		s, err := tcpBandwidth(t.Context(), 1024, buffered, 50*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, tcpImpl(buffered), s.Impl)
		assert.Equal(t, modeBandwidth, s.Mode)
		assert.Positive(t, s.Messages)
		assert.InDelta(t, float64(s.Messages)*1024/1e6/s.Seconds, s.MBPerS, 1e-6*s.MBPerS)
		assert.InDelta(t, s.MBPerS*1e6/1024, s.MsgsPerS, 1e-6*s.MsgsPerS)
		assert.Positive(t, s.CPUSecPerGB)
	}
}

func TestTCPPingPong(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		s, err := tcpPingPong(t.Context(), 64, buffered, 50*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, modePingPong, s.Mode)
		assert.Positive(t, s.RoundTrips)
		assert.Positive(t, s.LatP50us)
		assert.GreaterOrEqual(t, s.LatP99us, s.LatP50us)
	}
}

func TestOneWayMicros(t *testing.T) {
	rtts := []time.Duration{2 * time.Microsecond, 4 * time.Microsecond, 6 * time.Microsecond, 100 * time.Microsecond}
	assert.InDelta(t, 3.0, oneWayMicros(rtts, 0.5), 1e-9) // index 2 of 4: 6 µs / 2
	assert.InDelta(t, 50.0, oneWayMicros(rtts, 0.99), 1e-9)
	assert.Zero(t, oneWayMicros(nil, 0.5))
}
