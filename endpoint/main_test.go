package endpoint_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a poller, above all)
// outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
