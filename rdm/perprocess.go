package rdm

import (
	"errors"
	"fmt"
	"sync"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/internal/quirks"
)

// ErrOneEndpointPerProcess is returned (wrapped, also matching
// netio.ErrNotSupported) by Open of a second endpoint in one process on a
// provider whose endpoints use each other's memory directly within a
// process (shm in libfabric 1.17), unless both set Config.ShareProcess.
// Closing such an endpoint unmaps its shared region under the other
// endpoints of the process: one that then handles a message of the closed
// endpoint still in its queue (its first message, any above the inject
// size), or sends to it, crashes the process (SIGSEGV). Between processes
// each maps the region itself and a peer's close takes nothing away; open
// one endpoint per process, as readout programs run.
var ErrOneEndpointPerProcess = errors.New("rdm: this provider's endpoints crash the process when one closes beside another in it (one per process, or Config.ShareProcess)")

// inProcess counts the open endpoints of providers with
// quirks.Quirks.RegionsSharedInProcess, whatever their domain: the
// hazard is the process's, as the provider keeps its list of regions per
// process.
var inProcess struct {
	sync.Mutex
	open     int // all such endpoints open
	unshared int // those without Config.ShareProcess
}

// claimProcess admits an endpoint of provider into the process: always on
// a provider without the quirk; on one with it, when no other endpoint of
// it is open, or when this one and every open one set ShareProcess. It
// reports whether the endpoint was counted (releaseProcess then undoes
// that).
func claimProcess(provider string, share bool) (counted bool, err error) {
	if !quirks.For(provider).RegionsSharedInProcess {
		return false, nil
	}
	inProcess.Lock()
	defer inProcess.Unlock()
	if inProcess.open > 0 && (!share || inProcess.unshared > 0) {
		return false, fmt.Errorf("%w: %w: %d endpoint(s) of %s open here already", netio.ErrNotSupported, ErrOneEndpointPerProcess,
			inProcess.open, provider)
	}
	inProcess.open++
	if !share {
		inProcess.unshared++
	}
	return true, nil
}

// releaseProcess ends a counted endpoint's claim, once its libfabric
// endpoint is closed.
func releaseProcess(share bool) {
	inProcess.Lock()
	defer inProcess.Unlock()
	inProcess.open--
	if !share {
		inProcess.unshared--
	}
}
