package rdm

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"

	"github.com/netio-go/netio"
)

// sockaddr returns "HOST:PORT" as the struct sockaddr_in (or sockaddr_in6)
// the IP providers name endpoints by: family in host order, port in network
// order, then the address.
func sockaddr(addr string) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	p, perr := strconv.ParseUint(port, 10, 16)
	if err != nil || ip == nil || perr != nil || p == 0 {
		return nil, fmt.Errorf("%w: rdm: peer address %q is not IP:PORT", netio.ErrBadAddress, addr)
	}
	if ip4 := ip.To4(); ip4 != nil {
		b := make([]byte, 16) // sockaddr_in
		binary.NativeEndian.PutUint16(b[0:], afInet)
		binary.BigEndian.PutUint16(b[2:], uint16(p))
		copy(b[4:8], ip4)
		return b, nil
	}
	b := make([]byte, 28) // sockaddr_in6
	binary.NativeEndian.PutUint16(b[0:], afInet6)
	binary.BigEndian.PutUint16(b[2:], uint16(p))
	copy(b[8:24], ip.To16())
	return b, nil
}

// Address families of Linux.
const (
	afInet  = 2
	afInet6 = 10
)
