package headerbuf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/domain"
)

// TestHeaderSlotsAreSendOnly: the header region is one registration for
// sending and nothing else: headers go out, nothing comes in, no peer
// reads or writes it.
func TestHeaderSlotsAreSendOnly(t *testing.T) {
	h, m := newHeaderBuffer(t, 48, 16)
	assert.Equal(t, []domain.RegistrationInfo{{Addr: h.Region(), Len: h.RegionSize(), Access: domain.AccessSend}},
		m.Registrations())
}
