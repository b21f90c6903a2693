package endpoint

import (
	"errors"
	"net"
	"strconv"
	"testing"

	"github.com/netio-go/netio"
)

// FuzzSplitAddr feeds addresses from callers and command lines to the
// HOST:PORT parser: it never panics; it refuses with netio.ErrBadAddress,
// or returns a non-empty host and a port in 1..65535 (0 only when allowed)
// that net.JoinHostPort puts back together into an address it parses the
// same way.
func FuzzSplitAddr(f *testing.F) {
	for _, addr := range []string{"127.0.0.1:7000", "[::1]:0", "host:65535", "", "nohostport", "1.2.3.4:99999", "[::1", "host:-1", ":7000", "h:+80", "h:0x50"} {
		f.Add(addr, true)
		f.Add(addr, false)
	}
	f.Fuzz(func(t *testing.T, addr string, allowZeroPort bool) {
		host, port, err := splitAddr(addr, allowZeroPort)
		if err != nil {
			if !errors.Is(err, netio.ErrBadAddress) {
				t.Errorf("splitAddr(%q): %v does not match ErrBadAddress", addr, err)
			}
			if host != "" || port != "" {
				t.Errorf("splitAddr(%q) refused but returned %q, %q", addr, host, port)
			}
			return
		}
		n, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case host == "":
			t.Errorf("splitAddr(%q): empty host accepted", addr)
		case perr != nil:
			t.Errorf("splitAddr(%q): port %q is not a number in 0..65535", addr, port)
		case n == 0 && !allowZeroPort:
			t.Errorf("splitAddr(%q): port 0 accepted", addr)
		}
		h2, p2, err := splitAddr(net.JoinHostPort(host, port), allowZeroPort)
		if err != nil || h2 != host || p2 != port {
			t.Errorf("splitAddr(%q) = %q, %q, but its join gives %q, %q, %v", addr, host, port, h2, p2, err)
		}
	})
}
