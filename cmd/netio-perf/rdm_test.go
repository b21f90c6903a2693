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

// The --endpoint rdm modes in this process, on tcp;ofi_rxm (the default
// with rdm); tests/rdm_perf_test.go runs them as processes on every rdm
// provider. A server and its clients here are three domains, a poller
// each: before pollers of ofi_rxm domains stopped sleeping on the queues'
// wait descriptors (quirks.Quirks.StaleWaitEntries) about one run in a dozen
// crashed in fi_trywait (the same instruction, rxm_ep_trywait_cq, as the
// processes' crash); 20 of 20 runs under -race at load 8-12 passed after.

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
		"inject zero-copy":     {"client", "--inject", "--zero-copy", "--connect", "127.0.0.1:1"},
		"rdm server pingpong":  {"server", "--endpoint", "rdm", "--mode", "pingpong"},
		"rdm client pingpong":  {"client", "--endpoint", "rdm", "--mode", "pingpong", "--connect", "127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			var errOut bytes.Buffer
			assert.Equal(t, exitUsage, run(t.Context(), args, io.Discard, &errOut))
			assert.Contains(t, errOut.String(), "usage:")
		})
	}
}

// TestRDMServerFromTwoClients: one connectionless server receives from two
// clients at once, in this process (three domains), each client sending
// its pattern from message 0; the server verifies them without telling
// them apart.
func TestRDMServerFromTwoClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--endpoint", "rdm", "--count", "6000", "--buf-size", "4K", "--verify", "--json")
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			codes <- run(ctx, []string{"client", "--endpoint", "rdm", "--connect", srv.addr, "--size", "4K",
				"--count", "3000", "--bufs", "32", "--verify", "--json"}, io.Discard, io.Discard)
		}()
	}
	for range 2 {
		assert.Equal(t, exitOK, <-codes)
	}
	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, uint64(6000), s.Messages)
	assert.True(t, s.Verify)
	assert.Zero(t, s.VerifyErrors)
}

// TestRDMClientAboveRefillMax: a client of messages above rdmRefillMax
// sends from its goroutine (no refill), every message verified; the
// client of TestRDMServerFromTwoClients refills.
func TestRDMClientAboveRefillMax(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	srv := startServer(t, ctx, "--endpoint", "rdm", "--count", "1000", "--buf-size", "64K", "--verify", "--json")
	assert.Equal(t, exitOK, run(ctx, []string{"client", "--endpoint", "rdm", "--connect", srv.addr, "--size", "64K",
		"--count", "1000", "--bufs", "16", "--verify", "--json"}, io.Discard, io.Discard))
	code, last := srv.wait(t, ctx)
	assert.Equal(t, exitOK, code)
	s := decodeReport(t, last)
	assert.Equal(t, uint64(1000), s.Messages)
	assert.Zero(t, s.VerifyErrors)
}
