// Package storm_test runs connection storms against one listener and checks
// that every file descriptor, goroutine, registration and mapped byte comes
// back afterwards: thousands of connect/close cycles, and 64 connections
// streaming at once. The figures are logged for the closing note.
package storm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/netio-go/netio/domain"
)

// TestMain fails the package if any goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var providers = []string{"tcp", "sockets"}

// waitTimeout bounds every single wait of these tests (a completion, a
// delivery, a teardown): generous, for a loaded 2-core machine under -race.
const waitTimeout = 30 * time.Second

// openDomain opens a domain on loopback; at cleanup it must close, which
// it does only when no registration is left.
func openDomain(t *testing.T, prov string) *domain.Manager {
	t.Helper()
	mgr, err := domain.Open(domain.Config{Provider: prov, Address: "127.0.0.1"})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, mgr.Close()) })
	return mgr
}
