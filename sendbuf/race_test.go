package sendbuf_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/netio-go/netio/domain"
	"github.com/netio-go/netio/sendbuf"
)

// TestGetRacingCloseKeepsTheBufferMapped: a buffer handed out by a Get
// that raced Close is one the caller holds, so Close keeps its memory
// mapped and the caller's write lands (found in review: Close saw it free
// and unmapped it).
func TestGetRacingCloseKeepsTheBufferMapped(t *testing.T) {
	m := openDomain(t, domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	for range 5000 {
		p, err := sendbuf.NewPool(m, 64, 1)
		require.NoError(t, err)
		var b *sendbuf.NetworkBuffer
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); b = p.Get(me) }()
		go func() { defer wg.Done(); runtime.Gosched(); _ = p.Close() }()
		wg.Wait()
		if b != nil {
			b.Bytes()[0] = 1 // the caller fills the buffer it was given
			p.Release(b.ID(), me)
			require.NoError(t, p.Close())
		}
		runtime.KeepAlive(p)
	}
}

// TestConcurrentClose: two Closes at once release the region once, and
// neither returns before it is released.
func TestConcurrentClose(t *testing.T) {
	m := openDomain(t, domain.Config{Provider: "tcp", Address: "127.0.0.1"})
	for range 2000 {
		p, err := sendbuf.NewPool(m, 64, 4)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = p.Close() }()
		}
		wg.Wait()
		assert.NoError(t, errs[0])
		assert.NoError(t, errs[1])
		require.Zero(t, m.Stats().Registrations, "released once both returned")
	}
}
