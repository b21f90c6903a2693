package fabric_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/netio-go/netio/fabric"
)

// TestSocketsConnectionBuffers: libfabric's sockets provider reads the
// package's SocketsBufSizeEnv: once a message has crossed a sockets pair,
// the process holds a connected socket with the receive buffer that asks
// for (the kernel doubles SO_RCVBUF, bounded by net.core.rmem_max), where
// without it every connection starts at tcp_rmem's default. The default's
// name or its timing (set before libfabric initialises its providers)
// being wrong fails here, which TestProviderDefaults cannot see.
func TestSocketsConnectionBuffers(t *testing.T) {
	if presetBufSet {
		t.Skipf("%s named by the environment (%q): not the package's default", fabric.SocketsBufSizeEnv, presetBuf)
	}
	req, err := strconv.Atoi(fabric.SocketsBufSize())
	require.NoError(t, err)
	rmemMax, ok := procInt("/proc/sys/net/core/rmem_max", 0)
	tcpRmem, ok2 := procInt("/proc/sys/net/ipv4/tcp_rmem", 1)
	if !ok || !ok2 {
		t.Skip("no /proc/sys/net to read the kernel's buffer sizes from")
	}
	want := 2 * min(req, rmemMax)
	if want <= tcpRmem {
		t.Skipf("the kernel bounds the buffer (%d) to no more than its default (%d)", want, tcpRmem)
	}
	srv, cep, _ := receivingPair(t, "sockets")
	require.Zero(t, cep.Inject([]byte("one message, so the data connection exists")))
	_, ce := waitCompletion(t, srv, 5*time.Second)
	require.Nil(t, ce)
	assert.GreaterOrEqual(t, largestConnectedRcvBuf(t), want,
		"the connection sockets accepted has the receive buffer %s asks for", fabric.SocketsBufSizeEnv)
}

// procInt returns the field-th integer of a /proc file, false when the
// file or the field cannot be read.
func procInt(path string, field int) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if field >= len(f) {
		return 0, false
	}
	v, err := strconv.Atoi(f[field])
	return v, err == nil
}

// largestConnectedRcvBuf returns the largest SO_RCVBUF of the process's
// connected TCP sockets (listening ones and the provider's Unix socket
// pairs left out).
func largestConnectedRcvBuf(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	largest := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
			continue
		}
		if lis, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || lis != 0 {
			continue
		}
		if sa, err := unix.Getpeername(fd); err != nil || !isInet(sa) {
			continue
		}
		if rb, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err == nil {
			largest = max(largest, rb)
		}
	}
	return largest
}

// isInet reports whether sa is an IPv4 or IPv6 address.
func isInet(sa unix.Sockaddr) bool {
	switch sa.(type) {
	case *unix.SockaddrInet4, *unix.SockaddrInet6:
		return true
	}
	return false
}
