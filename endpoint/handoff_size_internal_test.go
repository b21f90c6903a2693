package endpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/sendcore"
)

// TestHandOffSizeIsTheCores: the documented constant is a literal, so
// that go doc shows it; the send core applies its own. They must agree.
func TestHandOffSizeIsTheCores(t *testing.T) {
	assert.Equal(t, sendcore.HandOffSize, HandOffSize)
}
