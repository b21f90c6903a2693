package pubsub_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a poller, a control
// connection's reader) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
