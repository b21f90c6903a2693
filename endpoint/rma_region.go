package endpoint

import (
	"encoding/binary"
	"fmt"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// RemoteRegion describes memory a peer exposed for RMA. It is small and
// plain, made to travel: MarshalBinary gives a fixed, versioned layout
// that UnmarshalBinary checks.
type RemoteRegion struct {
	// Addr is the address of the region's first byte as the exposing
	// provider wants it in fi_read/fi_write: its virtual address when the
	// domain has FI_MR_VIRT_ADDR, otherwise an offset from the start of the
	// registration (0). tcp and sockets in libfabric 1.17 use offsets.
	Addr uint64
	// Len is the region's length in bytes.
	Len uint64
	// Key is the registration's remote key (fi_mr_key).
	Key uint64
	// Access is what the peer may do: domain.AccessRemoteRead (Pull),
	// domain.AccessRemoteWrite (Push), or both.
	Access domain.Access
}

// Layout of a marshalled RemoteRegion, little-endian:
//
//	0  magic "NRMR"
//	4  version (1)
//	5  three zero bytes
//	8  Addr   uint64
//	16 Len    uint64
//	24 Key    uint64
//	32 Access uint64
const (
	// RemoteRegionSize is the length of a marshalled RemoteRegion.
	RemoteRegionSize    = 40
	remoteRegionVersion = 1
	remoteRegionMagic   = "NRMR"
)

const remoteAccess = domain.AccessRemoteRead | domain.AccessRemoteWrite

func (d RemoteRegion) validate() error {
	switch {
	case d.Len == 0:
		return fmt.Errorf("%w: endpoint: remote region of 0 bytes", netio.ErrInvalidArgument)
	case d.Addr+d.Len < d.Addr:
		return fmt.Errorf("%w: endpoint: remote region %#x+%d wraps around", netio.ErrInvalidArgument, d.Addr, d.Len)
	case d.Access == 0 || d.Access&^remoteAccess != 0:
		return fmt.Errorf("%w: endpoint: remote region access %s: want remote read and/or remote write",
			netio.ErrInvalidArgument, d.Access.String())
	}
	return nil
}

// AppendBinary appends the descriptor's fixed layout (RemoteRegionSize
// bytes) to b. A descriptor that could not be unmarshalled is refused.
func (d RemoteRegion) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	b = append(b, remoteRegionMagic...)
	b = append(b, remoteRegionVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, d.Addr)
	b = binary.LittleEndian.AppendUint64(b, d.Len)
	b = binary.LittleEndian.AppendUint64(b, d.Key)
	return binary.LittleEndian.AppendUint64(b, uint64(d.Access)), nil
}

// MarshalBinary returns the descriptor's fixed layout, RemoteRegionSize
// bytes.
func (d RemoteRegion) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, RemoteRegionSize))
}

// UnmarshalBinary parses a descriptor made by MarshalBinary. Anything else
// (wrong length, magic or version, non-zero padding, an empty or wrapping
// region, access other than remote read/write) is an error matching
// netio.ErrInvalidArgument, and d is left unchanged.
func (d *RemoteRegion) UnmarshalBinary(b []byte) error {
	if len(b) != RemoteRegionSize {
		return fmt.Errorf("%w: endpoint: remote region descriptor of %d bytes, want %d",
			netio.ErrInvalidArgument, len(b), RemoteRegionSize)
	}
	if string(b[:4]) != remoteRegionMagic {
		return fmt.Errorf("%w: endpoint: not a remote region descriptor (magic %q)", netio.ErrInvalidArgument, b[:4])
	}
	if b[4] != remoteRegionVersion {
		return fmt.Errorf("%w: endpoint: remote region descriptor version %d, want %d",
			netio.ErrInvalidArgument, b[4], remoteRegionVersion)
	}
	if b[5]|b[6]|b[7] != 0 {
		return fmt.Errorf("%w: endpoint: remote region descriptor has non-zero padding", netio.ErrInvalidArgument)
	}
	v := RemoteRegion{
		Addr:   binary.LittleEndian.Uint64(b[8:]),
		Len:    binary.LittleEndian.Uint64(b[16:]),
		Key:    binary.LittleEndian.Uint64(b[24:]),
		Access: domain.Access(binary.LittleEndian.Uint64(b[32:])),
	}
	if err := v.validate(); err != nil {
		return err
	}
	*d = v
	return nil
}
