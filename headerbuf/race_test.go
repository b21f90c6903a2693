package headerbuf_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/headerbuf"
)

// TestGetHeaderRacingCloseNeverCopiesIntoFreedMemory: GetHeader and Close
// at once either leave the slot taken (and Close refused) or take nothing.
// A slot handed out while Close saw it free would have its header copied
// into a region Close had unmapped (a SIGSEGV, found in review).
func TestGetHeaderRacingCloseNeverCopiesIntoFreedMemory(t *testing.T) {
	m := openDomain(t)
	hdr := make([]byte, 64)
	for round := range 5000 {
		h, err := headerbuf.New(m, 64, 1)
		require.NoError(t, err)
		var res headerbuf.Result
		var closeErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); res = h.GetHeader(hdr, 7) }()
		go func() { defer wg.Done(); runtime.Gosched(); closeErr = h.Close() }()
		wg.Wait()
		require.False(t, res.Status == netio.OK && closeErr == nil,
			"round %d: GetHeader OK and Close succeeded", round)
		if res.Status == netio.OK {
			_, st := h.ReturnHeader(res.Index)
			require.Equal(t, netio.OK, st)
			require.NoError(t, h.Close())
		}
	}
}

// TestConcurrentClose: two Closes at once release the region once, and
// neither returns before it is released.
func TestConcurrentClose(t *testing.T) {
	m := openDomain(t)
	for range 2000 {
		h, err := headerbuf.New(m, 64, 4)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = h.Close() }()
		}
		wg.Wait()
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		require.Zero(t, m.Stats().Registrations, "released once both returned")
	}
}
