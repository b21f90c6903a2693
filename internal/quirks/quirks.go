// Package quirks is the one table of what each libfabric 1.17 provider
// supports or breaks, with the reason, as far as the library acts on it.
// Code that behaves differently per provider asks For instead of naming
// providers; docs/providers.md tells users the same facts.
package quirks

import "strings"

// Quirks is what the library knows of a provider.
type Quirks struct {
	// DeliveryComplete: sends honour FI_DELIVERY_COMPLETE, completing only
	// once the peer placed the message (SendConfig.DeliveryComplete).
	DeliveryComplete bool
	// SoftwareRegistration: memory registration pins no physical pages, so
	// a registration of Go memory may outlive the pin (the zero-copy
	// endpoint then keeps it cached).
	SoftwareRegistration bool
	// CompletesWhenStaged: a send completes once the provider has copied
	// it into its own staging buffers, not when the peer took it; Close
	// discards what is still staged.
	CompletesWhenStaged bool
	// ShutdownCorrupts: fi_shutdown followed at once by fi_close corrupts
	// the provider's heap, so endpoints are closed without a shutdown
	// (fi_close alone tells the peer).
	ShutdownCorrupts bool
	// ProgressThread: the provider progresses on a thread of its own,
	// which a poller that spins without yielding can starve on few cores.
	ProgressThread bool
}

// table holds the core providers by name. A layered provider ("tcp;ofi_rxm")
// has the quirks of the layers combined (see For).
var table = map[string]Quirks{
	// tcp completes a send with FI_DELIVERY_COMPLETE when the peer
	// acknowledges its placement; it registers in software.
	"tcp": {DeliveryComplete: true, SoftwareRegistration: true},
	// sockets completes sends once it has buffered them whatever is asked,
	// runs a progress thread, and fi_shutdown before fi_close corrupts its
	// heap.
	"sockets": {SoftwareRegistration: true, CompletesWhenStaged: true, ShutdownCorrupts: true, ProgressThread: true},
	"udp":     {SoftwareRegistration: true},
	"shm":     {SoftwareRegistration: true},
	// The utility layers register through the core provider beneath them.
	"ofi_rxm": {SoftwareRegistration: true},
	"ofi_rxd": {SoftwareRegistration: true},
}

// For returns the quirks of provider, "tcp" or a layered name such as
// "tcp;ofi_rxm": a capability holds only if every layer has it, a defect
// if any layer has it. An unknown provider is assumed to pin pages and to
// honour nothing it was not measured to honour.
func For(provider string) Quirks {
	layers := strings.Split(provider, ";")
	q := Quirks{DeliveryComplete: true, SoftwareRegistration: true}
	for _, name := range layers {
		l, known := table[name]
		if !known {
			return Quirks{}
		}
		q.DeliveryComplete = q.DeliveryComplete && l.DeliveryComplete
		q.SoftwareRegistration = q.SoftwareRegistration && l.SoftwareRegistration
		q.CompletesWhenStaged = q.CompletesWhenStaged || l.CompletesWhenStaged
		q.ShutdownCorrupts = q.ShutdownCorrupts || l.ShutdownCorrupts
		q.ProgressThread = q.ProgressThread || l.ProgressThread
	}
	return q
}
