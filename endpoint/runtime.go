package endpoint

import (
	"github.com/rs/zerolog"

	"github.com/netio-go/netio/cq"
)

// Runtime says which poller runs an endpoint's completions and callbacks,
// and where the endpoint logs. Every endpoint config embeds it; the zero
// value gives the endpoint a poller of its own and logs nothing.
type Runtime struct {
	// Poller is an event loop to share with other endpoints of the same
	// domain (cq.Open); the caller closes it after the endpoints. Nil gives
	// the endpoint its own, configured by PollerConfig and closed with it.
	Poller *cq.Poller
	// PollerConfig configures the endpoint's own poller.
	PollerConfig cq.Config
	// Logger receives connection messages (never one per message). The
	// zero value logs nothing.
	Logger zerolog.Logger
}
