package endpoint

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/netio-go/netio"
	"github.com/netio-go/netio/domain"
)

// ExposedRegion is memory registered for remote access. Hand its
// Descriptor to the peer; Close withdraws it.
type ExposedRegion struct {
	reg  *domain.Registration
	mem  []byte
	pin  runtime.Pinner // pins Go memory given to Expose until Close
	desc RemoteRegion

	mu     sync.Mutex
	closed bool
}

// Expose registers mem for the remote access asked for:
// domain.AccessRemoteRead (peers may Pull from it),
// domain.AccessRemoteWrite (peers may Push into it), or both, and nothing
// else, so that a peer can do no more than the caller meant. Go memory is
// pinned until Close. The domain must support RMA (Manager.SupportsRMA).
func Expose(mgr *domain.Manager, mem []byte, access domain.Access) (*ExposedRegion, error) {
	if err := checkExpose(mgr, len(mem), access); err != nil {
		return nil, err
	}
	e := &ExposedRegion{mem: mem}
	e.pin.Pin(&mem[0])
	reg, err := mgr.Register(uintptr(unsafe.Pointer(&mem[0])), len(mem), access)
	if err != nil {
		e.pin.Unpin()
		return nil, fmt.Errorf("endpoint: expose %d bytes: %w", len(mem), err)
	}
	e.setReg(mgr, reg)
	return e, nil
}

// AllocExposed allocates size bytes outside the Go heap (page-aligned,
// zeroed) and exposes them like Expose. Bytes returns the memory; Close
// unregisters and unmaps it.
func AllocExposed(mgr *domain.Manager, size int, access domain.Access) (*ExposedRegion, error) {
	if err := checkExpose(mgr, size, access); err != nil {
		return nil, err
	}
	reg, err := mgr.AllocRegistered(size, access)
	if err != nil {
		return nil, fmt.Errorf("endpoint: expose %d bytes: %w", size, err)
	}
	e := &ExposedRegion{mem: reg.Bytes()[:size]} // the mapping is whole pages
	e.setReg(mgr, reg)
	return e, nil
}

func checkExpose(mgr *domain.Manager, size int, access domain.Access) error {
	switch {
	case mgr == nil:
		return fmt.Errorf("%w: endpoint: nil domain", netio.ErrInvalidArgument)
	case !mgr.SupportsRMA():
		return fmt.Errorf("%w: endpoint: provider %s has no RMA in this domain", netio.ErrInvalidArgument, mgr.Provider())
	case size <= 0:
		return fmt.Errorf("%w: endpoint: expose %d bytes", netio.ErrInvalidArgument, size)
	case access == 0 || access&^remoteAccess != 0:
		return fmt.Errorf("%w: endpoint: expose with access %s: want remote read and/or remote write only",
			netio.ErrInvalidArgument, access.String())
	}
	return nil
}

// setReg fills in the descriptor: the address a peer uses depends on the
// domain's mr_mode (virtual address, or offset 0 of the registration).
func (e *ExposedRegion) setReg(mgr *domain.Manager, reg *domain.Registration) {
	e.reg = reg
	var addr uint64
	if mgr.Info().MRVirtAddr() {
		addr = uint64(reg.Addr())
	}
	e.desc = RemoteRegion{Addr: addr, Len: uint64(reg.Len()), Key: reg.Key(), Access: reg.Access()}
}

// Descriptor returns what a peer needs to Pull from or Push into the
// region.
func (e *ExposedRegion) Descriptor() RemoteRegion { return e.desc }

// Bytes returns the exposed memory. Peers may change it at any time while
// exposed for remote writing.
func (e *ExposedRegion) Bytes() []byte { return e.mem }

// Close withdraws remote access (a peer's later transfer fails) and
// unregisters the memory; memory from AllocExposed is unmapped, Go memory
// unpinned. It is idempotent.
func (e *ExposedRegion) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.reg.Close()
	e.pin.Unpin()
	return err
}
