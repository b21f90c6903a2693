package quirks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/netio-go/netio/internal/quirks"
)

func TestFor(t *testing.T) {
	assert.True(t, quirks.For("tcp").DeliveryComplete)
	assert.False(t, quirks.For("sockets").DeliveryComplete, "sockets completes when staged")
	assert.True(t, quirks.For("sockets").CompletesWhenStaged)
	assert.True(t, quirks.For("sockets").ShutdownCorrupts)
	assert.True(t, quirks.For("tcp;ofi_rxm").SoftwareRegistration)
	assert.False(t, quirks.For("tcp;ofi_rxm").DeliveryComplete, "a capability holds only if every layer has it")
	assert.True(t, quirks.For("udp;ofi_rxd").SoftwareRegistration)
	assert.True(t, quirks.For("sockets").PeekBuffered)
	assert.False(t, quirks.For("tcp").PeekBuffered, "tcp takes FI_PEEK for a receive")
	assert.False(t, quirks.For("tcp;ofi_rxm").PeekBuffered, "the peek goes to the top layer, which must have it")
	assert.Equal(t, quirks.Quirks{}, quirks.For("verbs"), "unknown: assume it pins pages and honours nothing")
	assert.Equal(t, quirks.Quirks{}, quirks.For("tcp;verbs"), "one unknown layer makes the whole unknown")
}

func TestDefectsOfOneLayerHoldForTheWhole(t *testing.T) {
	q := quirks.For("sockets")
	assert.True(t, q.CapsInConnReq)
	assert.True(t, q.ShutdownBeforeDelivered)
	assert.True(t, q.MissesEarlyClose)
	assert.True(t, quirks.For("tcp").PassiveCloseReadsFreed)
	assert.True(t, quirks.For("tcp;ofi_rxm").PassiveCloseReadsFreed, "a layer's defect is assumed for the whole until measured")
	assert.True(t, quirks.For("tcp;ofi_rxm").TruncationDrops)
	assert.False(t, quirks.For("udp;ofi_rxd").TruncationDrops)
	assert.False(t, quirks.For("tcp").CompletesWhenStaged)
	assert.True(t, quirks.For("tcp;ofi_rxm").StaleWaitEntries, "ofi_rxm's defect holds for tcp;ofi_rxm")
	assert.False(t, quirks.For("tcp").StaleWaitEntries, "connected tcp keeps its wait objects")
	assert.False(t, quirks.For("udp;ofi_rxd").StaleWaitEntries)
	assert.True(t, quirks.For("shm").RegionsSharedInProcess)
	assert.False(t, quirks.For("tcp;ofi_rxm").RegionsSharedInProcess, "each endpoint of an IP provider has its own sockets")
}
