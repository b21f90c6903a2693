package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The --endpoint rdm modes in this process, each in one domain, on
// tcp;ofi_rxm (the default with rdm). A server and its clients are
// separate domains, each with its own poller thread, and libfabric 1.17
// crashed (SIGSEGV) once in about a dozen runs of them in one process
// (rdm/poller.go: its providers are safe on one thread only), so servers
// and clients are tested between processes, on every rdm provider
// (tests/rdm_perf_test.go).

// TestRDMSweep: the sweep over two connectionless endpoints of one domain
// measures throughput and round trips.
func TestRDMSweep(t *testing.T) {
	r, _ := runSweepJSON(t, "--endpoint", "rdm", "--quick", "--sizes", "64,64K")
	assert.Equal(t, "tcp;ofi_rxm", r.Provider, "--endpoint rdm defaults the provider")
	require.Len(t, r.Rows, 2)
	for _, row := range r.Rows {
		assert.Positive(t, row.Messages, "size %d", row.Size)
		assert.Equal(t, row.Messages*uint64(row.Size), row.Bytes, "size %d", row.Size)
		assert.GreaterOrEqual(t, row.RoundTrips, pingPongMinTimed, "size %d", row.Size)
		assert.Positive(t, row.LatP50us, "size %d", row.Size)
	}
}

// TestRDMServerTimeout: a server whose messages do not come fails.
func TestRDMServerTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--endpoint", "rdm", "--count", "10", "--timeout", "200ms")
	code, _ := srv.wait(t, ctx)
	assert.Equal(t, exitFail, code)
}

func TestRDMFlagErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown kind":         {"server", "--endpoint", "dgram"},
		"server coalesce":      {"server", "--endpoint", "rdm", "--coalesce"},
		"client zero-copy":     {"client", "--endpoint", "rdm", "--connect", "127.0.0.1:1", "--zero-copy"},
		"client no connect":    {"client", "--endpoint", "rdm"},
		"shm client no name":   {"client", "--endpoint", "rdm", "--provider", "shm"},
		"sweep other mode":     {"--endpoint", "rdm", "--mode", "scale"},
		"rdm connect not addr": {"client", "--endpoint", "rdm", "--connect", "nowhere"},
		"inject without rdm":   {"client", "--inject", "--connect", "127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			var errOut bytes.Buffer
			assert.Equal(t, exitUsage, run(t.Context(), args, io.Discard, &errOut))
			assert.Contains(t, errOut.String(), "usage:")
		})
	}
}
