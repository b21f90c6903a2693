package endpoint_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/endpoint"
)

// untouched is what a RemoteRegion holds before a refused UnmarshalBinary,
// which must leave it as it was.
var untouched = endpoint.RemoteRegion{Addr: 0xa11, Len: 0xb22, Key: 0xc33, Access: domain.AccessRemoteRead}

// FuzzRemoteRegionUnmarshal feeds peer-supplied bytes to the descriptor
// decoder: it never panics, refuses with netio.ErrInvalidArgument and
// leaves the value alone, or accepts a descriptor that is usable (not
// empty, not wrapping, remote access only) and marshals back to exactly
// the bytes it came from.
func FuzzRemoteRegionUnmarshal(f *testing.F) {
	valid, err := endpoint.RemoteRegion{Addr: 1 << 40, Len: 4096, Key: 7, Access: domain.AccessRemoteWrite}.MarshalBinary()
	require.NoError(f, err)
	f.Add(valid)
	f.Add([]byte{})
	f.Add(valid[:endpoint.RemoteRegionSize-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		d := untouched
		err := d.UnmarshalBinary(b)
		if err != nil {
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			assert.Equal(t, untouched, d, "a refused descriptor changes nothing")
			return
		}
		assert.NotZero(t, d.Len)
		assert.GreaterOrEqual(t, d.Addr+d.Len, d.Addr, "wraps around")
		assert.NotZero(t, d.Access)
		assert.Zero(t, d.Access&^(domain.AccessRemoteRead|domain.AccessRemoteWrite), "local access in a descriptor")
		out, err := d.MarshalBinary()
		require.NoError(t, err, "an accepted descriptor must marshal")
		assert.Equal(t, b, out, "round trip")
	})
}

// FuzzRemoteRegionMarshal builds descriptors from arbitrary fields: the
// encoder either refuses with netio.ErrInvalidArgument, leaving the
// caller's buffer as it was, or appends RemoteRegionSize bytes that
// decode to the same descriptor.
func FuzzRemoteRegionMarshal(f *testing.F) {
	f.Add(uint64(0), uint64(4096), uint64(1), uint64(domain.AccessRemoteRead))
	f.Add(^uint64(0)-10, uint64(100), uint64(2), uint64(domain.AccessRemoteWrite))
	f.Add(uint64(1), uint64(0), uint64(3), uint64(domain.AccessSend))
	f.Fuzz(func(t *testing.T, addr, length, key, access uint64) {
		d := endpoint.RemoteRegion{Addr: addr, Len: length, Key: key, Access: domain.Access(access)}
		prefix := []byte("prefix")
		out, err := d.AppendBinary(prefix)
		if err != nil {
			assert.ErrorIs(t, err, netio.ErrInvalidArgument)
			assert.Equal(t, []byte("prefix"), out, "a refused descriptor appends nothing")
			return
		}
		require.Len(t, out, len(prefix)+endpoint.RemoteRegionSize)
		assert.True(t, bytes.HasPrefix(out, []byte("prefix")))
		assert.Equal(t, key, binary.LittleEndian.Uint64(out[len(prefix)+24:]), "key at its documented offset")
		var back endpoint.RemoteRegion
		require.NoError(t, back.UnmarshalBinary(out[len(prefix):]))
		assert.Equal(t, d, back)
	})
}
