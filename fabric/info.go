package fabric

/*
#cgo pkg-config: libfabric
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"unsafe"
)

// Endpoint types and capability bits used in Hints.
const (
	EPMsg  = int(C.FI_EP_MSG)
	EPRDM  = int(C.FI_EP_RDM)
	CapMsg = uint64(C.FI_MSG)
	// CapRMA asks for one-sided reads and writes in both roles: issuing
	// them (FI_READ, FI_WRITE) and being their target (FI_REMOTE_READ,
	// FI_REMOTE_WRITE).
	CapRMA = uint64(C.FI_RMA | C.FI_READ | C.FI_WRITE | C.FI_REMOTE_READ | C.FI_REMOTE_WRITE)
	// CapSource asks connectionless endpoints to report the source of
	// each receive (FI_SOURCE); see Completion.Source.
	CapSource = uint64(C.FI_SOURCE)
)

// Access flags for RegisterMemory.
const (
	AccessSend        = uint64(C.FI_SEND)
	AccessRecv        = uint64(C.FI_RECV)
	AccessRead        = uint64(C.FI_READ)
	AccessWrite       = uint64(C.FI_WRITE)
	AccessRemoteRead  = uint64(C.FI_REMOTE_READ)
	AccessRemoteWrite = uint64(C.FI_REMOTE_WRITE)
)

// Completion flags found in CQ entries.
const (
	FlagSend  = uint64(C.FI_SEND)
	FlagRecv  = uint64(C.FI_RECV)
	FlagMsg   = uint64(C.FI_MSG)
	FlagRMA   = uint64(C.FI_RMA)
	FlagRead  = uint64(C.FI_READ)  // an RMA read (fi_read) completed
	FlagWrite = uint64(C.FI_WRITE) // an RMA write (fi_write) completed
)

// Binding flags for Endpoint.BindCQ.
const (
	BindTransmit = uint64(C.FI_TRANSMIT)
	BindRecv     = uint64(C.FI_RECV)
)

// Hints select providers in GetInfo. Empty strings are not passed.
type Hints struct {
	Provider string // prov_name, e.g. "tcp" or "sockets"
	Node     string // host name or address
	Service  string // port
	Source   bool   // Node/Service name the local (source) address: FI_SOURCE
	Fabric   string // fabric_attr->name, to match an already opened fabric
	Domain   string // domain_attr->name, to match an already opened domain
	EPType   int    // EPMsg (default) or EPRDM
	Caps     uint64 // default CapMsg
}

// Info is one fi_info entry, owned by the Go value: Free releases it. The
// accessors of a nil or freed Info return zero values, and the calls that
// take one refuse it with EBADF.
type Info struct {
	c *C.struct_fi_info
}

// GetInfo calls fi_getinfo and returns the first matching entry. The
// first call in a process applies the package's provider settings unless
// the environment names them (TCPStagingEnv, RxMCompPerProgressEnv,
// SocketsBufSizeEnv).
func GetInfo(h Hints) (*Info, error) {
	applyProviderDefaults()
	var ch C.struct_netio_hints
	var toFree []unsafe.Pointer
	cstr := func(s string) *C.char {
		if s == "" {
			return nil
		}
		p := C.CString(s)
		toFree = append(toFree, unsafe.Pointer(p))
		return p
	}
	defer func() {
		for _, p := range toFree {
			C.free(p)
		}
	}()
	ch.prov = cstr(h.Provider)
	ch.node = cstr(h.Node)
	ch.service = cstr(h.Service)
	ch.fabric = cstr(h.Fabric)
	ch.domain = cstr(h.Domain)
	ch.ep_type = C.int(EPMsg)
	if h.EPType != 0 {
		ch.ep_type = C.int(h.EPType)
	}
	ch.caps = C.uint64_t(CapMsg)
	if h.Caps != 0 {
		ch.caps = C.uint64_t(h.Caps)
	}
	if h.Source {
		ch.flags = C.FI_SOURCE
	}
	var list *C.struct_fi_info
	if err := opErr("fi_getinfo", C.netio_getinfo(&ch, &list)); err != nil {
		return nil, err
	}
	first := C.fi_dupinfo(list)
	C.fi_freeinfo(list)
	if first == nil {
		return nil, &OpError{Op: "fi_dupinfo", Err: ENOMEM}
	}
	return &Info{c: first}, nil
}

// Free releases the entry. It is safe to call more than once.
func (i *Info) Free() {
	if i.open() {
		C.fi_freeinfo(i.c)
		i.c = nil
	}
}

// Provider returns the provider name, e.g. "tcp".
func (i *Info) Provider() string { return C.GoString(i.attrs().fabric_attr.prov_name) }

// FabricName returns the fabric's name, e.g. "127.0.0.1/32".
func (i *Info) FabricName() string { return C.GoString(i.attrs().fabric_attr.name) }

// DomainName returns the domain's name, e.g. "lo".
func (i *Info) DomainName() string { return C.GoString(i.attrs().domain_attr.name) }

// MRCount returns the provider's limit on memory registrations (mr_cnt), or
// 0 when it reports none.
func (i *Info) MRCount() int { return int(i.attrs().domain_attr.mr_cnt) }

// IOVLimit returns the largest number of iovecs one send may carry.
func (i *Info) IOVLimit() int { return int(i.attrs().tx_attr.iov_limit) }

// InjectSize returns the largest message Inject accepts.
func (i *Info) InjectSize() int { return int(i.attrs().tx_attr.inject_size) }

// TxSize returns the transmit queue depth.
func (i *Info) TxSize() int { return int(i.attrs().tx_attr.size) }

// RxSize returns the receive queue depth.
func (i *Info) RxSize() int { return int(i.attrs().rx_attr.size) }

// MaxMsgSize returns the largest message the endpoint type carries.
func (i *Info) MaxMsgSize() uint64 { return uint64(i.attrs().ep_attr.max_msg_size) }

// MRModeLocal reports whether local buffers must be registered (FI_MR_LOCAL);
// netio-go registers them in any case.
func (i *Info) MRModeLocal() bool { return i.attrs().domain_attr.mr_mode&C.FI_MR_LOCAL != 0 }

// MRProvKey reports whether the provider picks registration keys.
func (i *Info) MRProvKey() bool { return i.attrs().domain_attr.mr_mode&C.FI_MR_PROV_KEY != 0 }

// Caps returns the capabilities the provider granted (CapMsg, CapRMA bits,
// and secondary ones it adds).
func (i *Info) Caps() uint64 { return uint64(i.attrs().caps) }

// HasCaps reports whether every bit of caps was granted.
func (i *Info) HasCaps(caps uint64) bool { return uint64(i.attrs().caps)&caps == caps }

// MRVirtAddr reports whether RMA addresses are virtual addresses of the
// target's memory (FI_MR_VIRT_ADDR). Without it they are offsets from the
// start of the target's registration.
func (i *Info) MRVirtAddr() bool { return i.attrs().domain_attr.mr_mode&C.FI_MR_VIRT_ADDR != 0 }

// MRMode returns the raw mr_mode bits the domain works with.
func (i *Info) MRMode() uint64 { return uint64(i.attrs().domain_attr.mr_mode) }

// Version returns the libfabric library version as "major.minor".
func Version() string {
	v := uint32(C.fi_version())
	return strconv.Itoa(int(v>>16)) + "." + strconv.Itoa(int(v&0xffff))
}

// SetDeliveryComplete asks that sends on endpoints opened with this entry
// complete only once the data is placed in the peer's receive buffer
// (FI_DELIVERY_COMPLETE in tx_attr.op_flags), not when the provider has
// buffered it.
func (i *Info) SetDeliveryComplete() {
	if i.open() {
		i.c.tx_attr.op_flags |= C.FI_DELIVERY_COMPLETE
	}
}

// PeerAddr returns the entry's destination address as "ip:port": for the
// Info of a connection request, the address of the peer asking to connect.
// It fails with EADDRNOTAVAIL when the entry holds no IP socket address.
func (i *Info) PeerAddr() (string, error) {
	if !i.open() {
		return "", &OpError{Op: "fi_info dest_addr", Err: EBADF}
	}
	var buf [80]C.char
	if err := opErr("fi_info dest_addr", C.netio_info_dest(i.c, &buf[0], C.size_t(len(buf)))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}
