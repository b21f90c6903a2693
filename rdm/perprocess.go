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
// process (shm in libfabric 1.17), unless it and every endpoint of that
// provider open in the process set Config.ShareProcess.
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
	// retired holds the names of such endpoints of the process that were
	// closed (retireName): one string per closed endpoint, kept for the
	// process's life, as libfabric keeps them.
	retired map[string]struct{}
}

// ErrRetiredName is returned (wrapped, also matching netio.ErrBadAddress)
// by AddPeer of the name of a closed endpoint of this process on a
// provider with quirks.Quirks.RegionsSharedInProcess (shm). libfabric 1.17
// keeps a closed endpoint's name in its process-wide list, with the
// address of its unmapped region, and looks a peer's name up there first:
// a send to that name (also to another process's endpoint of the same
// name) would be reported OK and go nowhere, or crash the process.
var ErrRetiredName = errors.New("rdm: the name of a closed endpoint of this process")

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
		return false, fmt.Errorf("%w: %w: %d endpoint(s) of %s open here already, %d of them without ShareProcess (this one %s)",
			netio.ErrNotSupported, ErrOneEndpointPerProcess, inProcess.open, provider, inProcess.unshared, shareText(share))
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

// shareText says whether an endpoint sets ShareProcess.
func shareText(share bool) string {
	if share {
		return "sets it"
	}
	return "does not set it"
}

// retireName records name as a closed endpoint's of provider, if the
// provider has the quirk (checkRetired then refuses it).
func retireName(provider, name string) {
	if name == "" || !quirks.For(provider).RegionsSharedInProcess {
		return
	}
	inProcess.Lock()
	defer inProcess.Unlock()
	if inProcess.retired == nil {
		inProcess.retired = make(map[string]struct{})
	}
	inProcess.retired[name] = struct{}{}
}

// checkRetired refuses name, a peer's, if a closed endpoint of provider
// in this process had it (ErrRetiredName).
func checkRetired(provider, name string) error {
	if !quirks.For(provider).RegionsSharedInProcess {
		return nil
	}
	inProcess.Lock()
	_, retired := inProcess.retired[name]
	inProcess.Unlock()
	if retired {
		return fmt.Errorf("%w: %w %q: libfabric still lists it with its unmapped region", netio.ErrBadAddress, ErrRetiredName, name)
	}
	return nil
}
