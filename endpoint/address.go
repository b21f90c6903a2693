package endpoint

import (
	"fmt"
	"net"
	"strconv"

	"github.com/netio-go/netio"
)

// splitAddr parses "HOST:PORT". A port of 0 is accepted only when
// allowZeroPort (listening on any free port).
func splitAddr(addr string, allowZeroPort bool) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("%w: %q: %v", netio.ErrBadAddress, addr, err)
	}
	if host == "" {
		return "", "", fmt.Errorf("%w: %q: no host", netio.ErrBadAddress, addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !allowZeroPort) {
		return "", "", fmt.Errorf("%w: %q: port must be a number in 1..65535", netio.ErrBadAddress, addr)
	}
	return host, port, nil
}
